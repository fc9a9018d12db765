"""Are generated out-of-scope questions ones a person would ask? Hand labels by edit kind (issue #39).

    # 1. the samples: SubjQA reviews (../shared, read at run time) and the invented stories and news
    #    paragraphs of benchmarks/data/implied and near-miss, none used to tune the generator, in
    #    disjoint halves drawn in turn, each fresh when a change was measured on it (the halves, their
    #    draws and notes: benchmarks/data/generation_natural_samples.json; why each was drawn:
    #    docs/research/generation-history.md)
    python benchmarks/generation_natural.py corpus --work /tmp/natural

    # 2. generate on a half with the packaged 1.5B (scopeguard generate's pipeline, offline mode)
    python benchmarks/generation_natural.py generate --half B --run after --work /tmp/natural

    # 3. write the questions to label (text stays in --work, never in the repo), label them by hand
    #    in benchmarks/results/generation_natural_review.json, then summarise
    python benchmarks/generation_natural.py review --run after --work /tmp/natural
    python benchmarks/generation_natural.py report --work /tmp/natural
    # can the reading model itself tell the natural ones? (fluency, its own Yes/No; AUROC)
    python benchmarks/generation_natural.py signals --work /tmp/natural
    # the in-scope side: how often the filter keeps an unanswerable candidate and drops an
    # answerable one (hand labels in generation_natural_in_scope_review.json), and what reading a
    # dropped one again against only its source sentence would recover
    python benchmarks/generation_natural.py in-scope --run after-H-off --work /tmp/natural --sentence \\
        --detector default
    # a tuned reader's folder (train-reader's --out) as the filter: NAME@LLM
    python benchmarks/generation_natural.py in-scope --run after-H-off --work /tmp/natural \\
        --detector logprob@local:/tmp/lodo15k/n1000-without-squad2-train

A hand label is keyed by the question's sha256 (first 12 hex digits, as in generation_offline.py):
``natural`` (a person reading or writing about the document could send it: grammatical, no phrase
of a prompt's example, a premise that makes sense) and ``answerable`` (the document answers it).
The report gives, per run and edit kind, the kept out-of-scope questions labelled, the shares
natural, unanswerable and both, the in-scope and out-of-scope questions per document, seconds per
document and the machine; ``report`` writes ``benchmarks/results/generation_natural.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import random
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from _natural_reads import detector_label, in_scope, label_of, labels_by_sha, run_records, share, signals
from _report import cpu_model, earlier_rows, report, settings
from generation_offline import question_sha

from scopeguard.data import read_jsonl
from scopeguard.generation.checkpoint import DocumentRecord

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data"
# the halves in the order drawn, each with its draw and a note, and what each run was generated
# with (why each half was drawn: docs/research/generation-history.md)
SAMPLES = HERE / "data" / "generation_natural_samples.json"
REVIEW = HERE / "results" / "generation_natural_review.json"
RESULT = HERE / "results" / "generation_natural.json"
SIGNALS = HERE / "results" / "generation_natural_signals.json"
IN_SCOPE_REVIEW = HERE / "results" / "generation_natural_in_scope_review.json"
IN_SCOPE = HERE / "results" / "generation_natural_in_scope.json"
MODEL = "qwen2.5-coder-1.5b"
logger = logging.getLogger("generation_natural")


@functools.cache
def _samples() -> dict[str, Any]:
    """The manifest ``SAMPLES``: ``seed``, ``review_words``, ``min_words``, ``invented`` (folders
    of benchmarks/data), ``halves`` (in the order drawn), ``runs`` and ``in_scope_runs``."""
    return json.loads(SAMPLES.read_text(encoding="utf-8"))


def _halves() -> list[str]:
    """Every half's name, in the order drawn (the last is the default of --half)."""
    return [h["half"] for h in _samples()["halves"]]


def _corpus(work: Path, seed: int) -> None:
    """Write ``work/HALF/documents.jsonl`` for every half of the manifest (disjoint samples; each
    later half is drawn after the earlier ones, so adding one leaves them as they were)."""
    m = _samples()
    rng = random.Random(seed)
    low, high = m["review_words"]
    reviews = [
        d for d in read_jsonl(SHARED / "subjqa" / "documents.jsonl") if low <= len(d["text"].split()) <= high
    ]
    invented = [HERE / "data" / name for name in m["invented"]]
    picked: dict[str, list[dict[str, Any]]] = {h: [] for h in _halves()}
    # the first draw, shared by the halves that have one and split among them in order
    first = [(h["half"], h["first_draw"]) for h in m["halves"] if "first_draw" in h]
    chosen = rng.sample(reviews, sum(n["reviews"] for _, n in first))
    for half, n in first:
        picked[half], chosen = chosen[: n["reviews"]], chosen[n["reviews"] :]
    for folder in invented:
        docs = rng.sample(list(read_jsonl(folder / "documents.jsonl")), sum(n["invented"] for _, n in first))
        for half, n in first:
            picked[half] += docs[: n["invented"]]
            docs = docs[n["invented"] :]
    # then each half in turn: reviews, then stories, of at least min_words words, none taken before
    taken = {d["doc_id"] for docs in picked.values() for d in docs}
    pools = {"reviews": reviews, "stories": list(read_jsonl(invented[0] / "documents.jsonl"))}
    for h in m["halves"]:
        for pool, n in h.get("draw", {}).items():
            long_enough = (d for d in pools[pool] if len(d["text"].split()) >= m["min_words"])
            fresh = [d for d in long_enough if d["doc_id"] not in taken]
            picked[h["half"]] += rng.sample(fresh, n)
            taken |= {d["doc_id"] for d in picked[h["half"]]}
    for half, docs in picked.items():
        out = work / half
        out.mkdir(parents=True, exist_ok=True)
        with (out / "documents.jsonl").open("w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"doc_id": d["doc_id"], "text": d["text"]}) + "\n")
        logger.info("wrote %d documents to %s", len(docs), out)


def _generate(work: Path, half: str, run: str, threads: int, changes: dict[str, Any]) -> None:
    from scopeguard.generation import GenerationConfig, Generator
    from scopeguard.llm.local import LlamaCppChatModel

    os.environ["SCOPEGUARD_N_THREADS"] = str(threads)  # the filter's model too
    docs = list(read_jsonl(work / half / "documents.jsonl"))
    llm = LlamaCppChatModel(MODEL, n_threads=threads)
    out = work / run
    config = GenerationConfig(mode="offline", **changes)
    Generator(llm, config=config, progress=True).run(docs, out)  # type: ignore[arg-type]
    (out / "half.txt").write_text(half, encoding="utf-8")


def _to_label(work: Path, run: str) -> None:
    """``work/RUN/to_label.jsonl``: each kept out-of-scope question beside its document, for a reader."""
    half = (work / run / "half.txt").read_text(encoding="utf-8")
    docs = {d["doc_id"]: d["text"] for d in read_jsonl(work / half / "documents.jsonl")}
    path = work / run / "to_label.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for r in run_records(work, run):
            for q in r.questions:
                f.write(
                    json.dumps(
                        {
                            "question_sha": question_sha(q.question),
                            "doc_id": r.doc_id,
                            "label": q.label,
                            "edit_kind": q.edit_kind,
                            "source_question": q.source_question,
                            "question": q.question,
                            "document": docs.get(r.doc_id, "")[:2000],
                        }
                    )
                    + "\n"
                )
    logger.info("wrote %s", path)


def _rows(work: Path, labels: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for run in sorted(p.name for p in work.iterdir() if (p / "half.txt").is_file()):
        records = [r for r in run_records(work, run) if r.status == "done"]
        by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
        missing = 0
        for r in records:
            for q in r.questions:
                if q.label != "out_of_scope":
                    continue
                lab = label_of(labels, r.doc_id, q.question)
                if lab is None:
                    missing += 1
                    continue
                by_kind[str(q.edit_kind)].append(lab)
                if q.filled:  # kept from within the filter's margin (fill_from_margin)
                    by_kind["filled"].append(lab)
                by_kind["all"].append(lab)
        seconds = [r.seconds for r in records]
        for kind, labs in sorted(by_kind.items(), key=lambda kv: (kv[0] == "all", kv[0])):
            rows.append(
                {
                    "run": run,
                    "half": (work / run / "half.txt").read_text(encoding="utf-8"),
                    "edit_kind": kind,
                    "labelled": len(labs),
                    "unlabelled": missing if kind == "all" else None,
                    "natural": share([lab["natural"] for lab in labs]),
                    "unanswerable": share([not lab["answerable"] for lab in labs]),
                    "natural_and_unanswerable": share(
                        [lab["natural"] and not lab["answerable"] for lab in labs]
                    ),
                    "docs": len(records) if kind == "all" else None,
                    "in_scope_per_doc": round(statistics.mean(r.count("in_scope") for r in records), 2)
                    if kind == "all" and records
                    else None,
                    "oos_per_doc": round(statistics.mean(r.count("out_of_scope") for r in records), 2)
                    if kind == "all" and records
                    else None,
                    "docs_with_3_in_2_out": sum(
                        r.count("in_scope") >= 3 and r.count("out_of_scope") >= 2 for r in records
                    )
                    if kind == "all"
                    else None,
                    "seconds_per_doc_median": round(statistics.median(seconds), 1)
                    if kind == "all" and seconds
                    else None,
                    "seconds_per_doc_max": round(max(seconds), 1) if kind == "all" and seconds else None,
                    **(_filled(records) if kind == "all" else {}),
                    # labelled a rewording of another kept question of its document (from half K)
                    "copies": sum(bool(lab.get("copy")) for lab in labs)
                    if any("copy" in lab for lab in labs)
                    else None,
                }
            )
    return rows


def _filled(records: list[DocumentRecord]) -> dict[str, int]:
    """How many questions a run kept from within the filter's margin, and how many documents meet
    the counts without them (what the same run gives with fill_from_margin off)."""

    def count(r: DocumentRecord, label: str, filled: bool) -> int:
        return sum(q.label == label and (filled or not q.filled) for q in r.questions)

    return {
        "filled_out_of_scope": sum(count(r, "out_of_scope", True) for r in records)
        - sum(count(r, "out_of_scope", False) for r in records),
        "filled_in_scope": sum(count(r, "in_scope", True) for r in records)
        - sum(count(r, "in_scope", False) for r in records),
        "docs_with_3_in_2_out_unfilled": sum(
            count(r, "in_scope", False) >= 3 and count(r, "out_of_scope", False) >= 2 for r in records
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["corpus", "generate", "review", "report", "signals", "in-scope"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-generation-natural"))
    ap.add_argument("--half", choices=_halves(), default=_halves()[-1])
    ap.add_argument("--run", default="after", help="in-scope: comma-separated runs")
    ap.add_argument(
        "--sentence",
        action="store_true",
        help="in-scope: read each dropped candidate again against its source sentence alone",
    )
    ap.add_argument(
        "--detector",
        default=None,
        help="in-scope: a detector read as the filter in its place: NAME or NAME@LLM (e.g. default, "
        "logprob@local:/path/to/tuned-reader)",
    )
    ap.add_argument("--seed", type=int, default=_samples()["seed"])
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--note", default="", help="recorded with the figures (e.g. a shared machine)")
    ap.add_argument(
        "--set",
        nargs="*",
        default=[],
        help="generate: GenerationConfig fields, KEY=JSON (e.g. max_oos=null or "
        '\'screens=["degenerate", "moored", "natural"]\'; the settings of issue #39\'s runs '
        "named in the runs of data/generation_natural_samples.json are retired, "
        "docs/research/generation-history.md)",
    )
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    threads = args.threads or os.cpu_count() or 1
    if args.step == "corpus":
        _corpus(args.work, args.seed)
    elif args.step == "generate":
        from scopeguard.generation import GenerationConfig

        _generate(args.work, args.half, args.run, threads, settings(args.set, GenerationConfig.model_fields))
        _to_label(args.work, args.run)
    elif args.step == "review":
        _to_label(args.work, args.run)
    elif args.step == "signals":
        labels = labels_by_sha(REVIEW)
        found = signals(args.work, labels, threads, MODEL)
        rows = [{"signal": k, **v} for k, v in found.items()]
        report(rows, {"benchmark": "generation_natural signals", "machine": {"cpu": cpu_model()}}, SIGNALS)
    elif args.step == "in-scope":
        labels = labels_by_sha(IN_SCOPE_REVIEW)
        found = in_scope(args.work, args.run.split(","), labels, args.sentence, args.detector)
        # a run not read this time (one written by a version of the generator since changed:
        # insc-H-dev) keeps its recorded row and questions; a run read again keeps what this read
        # did not measure (another --detector's columns, --sentence's)
        kept, earlier = earlier_rows(IN_SCOPE, set(found))
        before = {row["run"]: row for row in earlier.get("rows", [])}
        old = earlier.get("questions", {})
        rows = kept + [
            {"run": run, **before.get(run, {}), **found[run]["summary"], "cpu": cpu_model()} for run in found
        ]
        questions = {k: v for k, v in old.items() if k not in found}
        for run in found:
            was = {i["question_sha"]: i for i in old.get(run, [])}
            questions[run] = [{**was.get(i["question_sha"], {}), **i} for i in found[run]["questions"]]
        detectors = {**earlier.get("detectors", {"default": "default"})}
        if args.detector:
            detectors[detector_label(args.detector)] = args.detector
        meta = {
            "benchmark": "generation_natural in-scope",
            "runs": {row["run"]: _samples()["in_scope_runs"].get(row["run"], "") for row in rows},
            "model": f"{MODEL} (writer), the auto filter (packaged logprob detector)",
            "detectors": detectors,
            "questions": questions,
        }
        report(rows, meta, IN_SCOPE)
    else:
        labels = labels_by_sha(REVIEW)
        rows = [{**row, "cpu": cpu_model()} for row in _rows(args.work, labels)]
        # a run not in --work keeps its recorded rows, and the CPU they were recorded on where noted
        kept, earlier = earlier_rows(args.out, {row["run"] for row in rows})
        cpu = earlier.get("machine", {}).get("cpu")
        unknown = f"not recorded with the run (the report that kept it ran on {cpu})"
        rows = [{**row, "cpu": row.get("cpu", unknown)} for row in kept] + rows
        m = _samples()
        low, high = m["review_words"]
        report(
            rows,
            {
                "benchmark": "generation_natural",
                "data": f"SubjQA reviews of {low}-{high} words and the invented "
                f"{' / '.join(m['invented'])} documents, seed {args.seed}, in {len(m['halves'])} halves "
                f"drawn one after another ({SAMPLES.relative_to(HERE.parent)} has each half's draw and "
                f"a note); ELOQ's length rule skips those under {m['min_words']} words",
                "model": f"{MODEL} (writer), the auto filter (packaged logprob detector)",
                "runs": m["runs"],
                "machine": {
                    "cpu": cpu_model(),
                    "cores": os.cpu_count(),
                    "threads": threads,
                    "note": args.note,
                },
            },
            args.out,
        )


if __name__ == "__main__":
    main()
