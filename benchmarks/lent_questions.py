"""Out-of-scope questions lent from a query log (``scopeguard generate CORPUS --questions LOG``),
read by hand: natural and unanswerable against the document each was asked of?

Per domain a seeded sample of a data set's in-scope questions is the log (each with its own
document as ``doc_ids``) and the data set's documents the corpus; the lending asks each question of
the documents MiniLM ranks below its own and keeps those the generator's filter finds out of scope.

    # the logs (W/DOMAIN/log.jsonl; W outside the repository: they hold data set text)
    python benchmarks/lent_questions.py draw --work W --seed 1301 --questions 20
    # a fresh draw: none of the questions an earlier work folder logged
    python benchmarks/lent_questions.py draw --work W2 --seed 1302 --questions 30 --fresh-from W
    # the lending, one domain at a time (resumable: a rerun skips what was read)
    python benchmarks/lent_questions.py run --work W --domain wikipedia
    # each kept question beside the document it was asked of (W/DOMAIN/sheet.txt), empty labels
    # in the review file; fill natural / answerable there, then
    python benchmarks/lent_questions.py sheet --work W --domain wikipedia
    # the whole log of each domain planned over its corpus, no read (W/DOMAIN/coverage.json)
    python benchmarks/lent_questions.py coverage --work W
    python benchmarks/lent_questions.py report --work W

Domains: ``wikipedia`` (SQuAD 2.0 paragraphs, ../shared/data/squad2-train), ``reviews`` (SubjQA,
../shared/data/subjqa), ``policies`` (the invented pages of benchmarks/data/policies, 24 organisations'
one page each), ``helpcentre`` (benchmarks/data/helpcentre: three organisations' own related pages,
as one deployment's corpus would be). A question
whose own document was a target of ``studies/neighbour_questions.py`` is not drawn. ``draw`` with a
larger ``--questions`` (same seed) extends a log: the first questions stay, the run reads the new.

Hand labels (``studies/results/lent_questions_review.json``) are keyed ``DOC_ID:SHA`` (the document
asked, the question's sha256 prefix, as in ``generation_domains.py``) and hold ``domain``,
``natural`` (a sensible question a person could ask of that document: in its context, the same
article's subject, the same organisation or service, the same kind of thing reviewed, a person
could plausibly ask it there; a question about another organisation, product or place, or one
that leans on its own document, "the fault" with no fault in sight, is not) and ``answerable``
(that document answers it, one step of reasoning from a stated rule included); no text. The
report (``results/lent_questions.json``) gives per domain the
share natural and unanswerable with its Wilson 95% interval, the reads and kept questions, the
neighbours asked with at least 2 lent questions, and seconds per read; with ``coverage``, the
neighbours the whole log would ask at least twice (``whole_log_*``: an upper bound on those with 2
lent questions, before the filter); and, as a diagnostic, how
many kept questions the generator keeper's topic screen (``min_overlap`` of their content words in
the document asked) would pass, and how many kept questions have a MiniLM cosine of at least
``CLOSE`` to the document asked (a floor chosen on this draw's labels, not validated), with how
many of each natural and unanswerable.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
from pathlib import Path
from typing import Any

from _report import cpu_model, report, wilson
from generation_domains import ROOT, SHARED, label_key, read_labels, write_labels

from scopeguard.data import read_jsonl

HERE = Path(__file__).resolve().parent
REVIEW = HERE / "studies" / "results" / "lent_questions_review.json"
RESULT = HERE / "results" / "lent_questions.json"
STUDIED = HERE / "studies" / "results" / "neighbour_questions.json"
DATASETS = {
    "wikipedia": SHARED / "squad2-train",
    "reviews": SHARED / "subjqa",
    "policies": ROOT / "benchmarks" / "data" / "policies",
    "helpcentre": ROOT / "benchmarks" / "data" / "helpcentre",
}
TARGET = 0.75  # natural and unanswerable, each domain
CLOSE = 0.4  # the diagnostic floor on a kept question's cosine to the document asked
DOCUMENT_CHARS = 3000


def studied_ids() -> set[str]:
    """The documents ``studies/neighbour_questions.py`` asked: not drawn again."""
    result = json.loads(STUDIED.read_text(encoding="utf-8"))
    return {i for run in result.values() for d in run["domains"].values() for i in d["target_ids"]}


def draw(args: argparse.Namespace) -> None:
    skip = studied_ids()
    for domain in args.domain or list(DATASETS):
        folder = DATASETS[domain]
        if not (folder / "questions.jsonl").is_file():
            raise SystemExit(f"{folder} not found")
        earlier = args.fresh_from / domain / "log.jsonl" if args.fresh_from else None
        logged = {q["id"] for q in read_jsonl(earlier)} if earlier and earlier.is_file() else set()
        pool = [
            q
            for q in read_jsonl(folder / "questions.jsonl")
            if q["label"] == "in_scope" and q["doc_id"] not in skip and q["id"] not in logged
        ]
        random.Random(args.seed).shuffle(pool)  # a larger --questions keeps the first ones
        chosen = pool[: args.questions]
        rows = [{"id": q["id"], "question": q["question"], "doc_ids": [q["doc_id"]]} for q in chosen]
        (args.work / domain).mkdir(parents=True, exist_ok=True)
        (args.work / domain / "log.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
        )
        plan = {
            "seed": args.seed,
            "questions": args.questions,
            "corpus": str(folder),
            "fresh_from": len(logged),
        }
        (args.work / domain / "plan.json").write_text(json.dumps(plan) + "\n")
        print(f"{domain}: {len(rows)} logged questions of {len(pool)} in scope")


def run(args: argparse.Namespace) -> None:
    from scopeguard.generation.lending import Lender

    for domain in args.domain:
        work = args.work / domain
        summary = Lender(progress=True).run(DATASETS[domain], work / "log.jsonl", work / "out")
        print(summary.table())
        runs = json.loads((work / "runs.json").read_text()) if (work / "runs.json").is_file() else []
        runs.append(
            {
                "read": summary.read_run,
                "failed": summary.failed_run,
                "unlike": summary.unlike,
                "seconds": round(summary.seconds, 1),
            }
        )
        (work / "runs.json").write_text(json.dumps(runs) + "\n")


def kept_rows(work: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(work / "out" / "questions.jsonl"))


def sheet(args: argparse.Namespace) -> None:
    labels = read_labels(REVIEW)
    for domain in args.domain:
        work = args.work / domain
        texts = {d["doc_id"]: d["text"] for d in read_jsonl(work / "out" / "documents.jsonl")}
        lines: list[str] = []
        by_doc: dict[str, list[dict[str, Any]]] = {}
        for q in kept_rows(work):
            by_doc.setdefault(q["doc_id"], []).append(q)
        for doc_id, rows in by_doc.items():
            lines += ["", f"=== {doc_id}", texts[doc_id][:DOCUMENT_CHARS]]
            for q in rows:
                key = label_key(doc_id, q["question"])
                lines.append(f"  [{key}] (P={q['score']}, rank {q['rank']}) {q['question']}")
                labels.setdefault(key, {"domain": domain, "natural": None, "answerable": None})
        (work / "sheet.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        kept = sum(len(r) for r in by_doc.values())
        print(f"{domain}: {kept} kept on {len(by_doc)} documents -> {work}/sheet.txt")
    write_labels(REVIEW, labels)


def on_topic(kept: list[dict[str, Any]], texts: dict[str, str]) -> list[bool]:
    """Whether each kept question passes the keeper's topic screen against the document it was
    asked of: at least ``min_overlap`` of its content words in it (a diagnostic; lending has no
    such screen)."""
    from scopeguard.generation.config import GenerationConfig
    from scopeguard.generation.offline import DocumentView, overlap

    floor = GenerationConfig().min_overlap
    views = {d: DocumentView.of(t) for d, t in texts.items()}
    return [overlap(q["question"], views[q["doc_id"]].stems) >= floor for q in kept]


def close(kept: list[dict[str, Any]], texts: dict[str, str]) -> list[bool]:
    """Whether each kept question's MiniLM cosine to the document it was asked of is at least
    ``CLOSE`` (a diagnostic chosen on this draw's labels, not validated on another)."""
    from scopeguard.retrieval.dense import SentenceEncoder

    if not kept:
        return []
    encoder = SentenceEncoder("minilm", show_progress=False)
    q = encoder.encode([k["question"] for k in kept])
    d = encoder.encode([texts[k["doc_id"]] for k in kept])
    return [float(a @ b) >= CLOSE for a, b in zip(q, d, strict=True)]


def is_good(lab: dict[str, Any]) -> bool:
    return bool(lab["natural"]) and not lab["answerable"]


def domain_row(domain: str, work: Path, labels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    kept = kept_rows(work)
    texts = {d["doc_id"]: d["text"] for d in read_jsonl(work / "out" / "documents.jsonl")}
    topical = on_topic(kept, texts)
    found = [labels.get(label_key(q["doc_id"], q["question"])) for q in kept]
    done = [lab is not None and None not in (lab.get("natural"), lab.get("answerable")) for lab in found]
    read = [lab for lab, ok in zip(found, done, strict=True) if ok and lab is not None]
    on = [lab for lab, ok, t in zip(found, done, topical, strict=True) if ok and t and lab is not None]
    near = [
        lab
        for lab, ok, c in zip(found, done, close(kept, texts), strict=True)
        if ok and c and lab is not None
    ]
    good = sum(is_good(lab) for lab in read)
    natural = sum(bool(lab["natural"]) for lab in read)
    unanswerable = sum(not lab["answerable"] for lab in read)
    reads = list(read_jsonl(work / "out" / ".lending" / "reads.jsonl"))
    per_doc: dict[str, int] = {}
    for q in kept:
        per_doc[q["doc_id"]] = per_doc.get(q["doc_id"], 0) + 1
    asked = {r["doc_id"] for r in reads}
    runs = json.loads((work / "runs.json").read_text())
    seconds, n_read = sum(r["seconds"] for r in runs), sum(r["read"] for r in runs)
    low, high = wilson(good, len(read)) or (0.0, 0.0)
    plan = json.loads((work / "plan.json").read_text())
    whole = json.loads((work / "coverage.json").read_text()) if (work / "coverage.json").is_file() else {}
    settings = json.loads((work / "out" / "lending.json").read_text())
    return {
        "domain": domain,
        "seed": plan["seed"],
        "min_similarity": settings.get("min_similarity", 0.0),
        "unlike": runs[-1].get("unlike", 0),  # pairs passed over, on another subject (the last run)
        "logged": sum(1 for _ in read_jsonl(work / "log.jsonl")),
        "reads": len(reads),
        "kept": len(kept),
        "read_by_hand": len(read),
        "natural": natural,
        "unanswerable": unanswerable,
        "natural_unanswerable": good,
        "share": round(good / len(read), 3) if read else None,
        "interval": [round(low, 3), round(high, 3)],
        "meets_target": bool(read) and good / len(read) >= TARGET,
        "on_topic": len(on),
        "on_topic_natural_unanswerable": sum(is_good(lab) for lab in on),
        "close": len(near),
        "close_natural_unanswerable": sum(is_good(lab) for lab in near),
        "neighbours_asked": len(asked),
        "neighbours_with_2": sum(n >= 2 for n in per_doc.values()),
        "seconds_per_read": round(seconds / n_read, 2) if n_read else None,
        **{f"whole_log_{k}": v for k, v in whole.items()},
    }


def report_all(args: argparse.Namespace) -> None:
    labels = read_labels(REVIEW)
    rows = [
        domain_row(d, args.work / d, labels)
        for d in args.domain or list(DATASETS)
        if (args.work / d).is_dir()
    ]
    fresh = {(r["domain"], r["seed"]) for r in rows}
    earlier = json.loads(args.out.read_text())["rows"] if args.out.is_file() else []
    rows = [r for r in earlier if (r["domain"], r["seed"]) not in fresh] + rows  # other draws stay
    result = {
        "machine": cpu_model(),
        "date": datetime.date.today().isoformat(),
        "target": TARGET,
        "retriever": "minilm",
        "neighbours": 3,
        "close": CLOSE,
    }
    report(rows, result, args.out)


def coverage(args: argparse.Namespace) -> None:
    """Each domain's whole log (every in-scope question) planned over its corpus, no read: the
    neighbours that would be asked at least twice (an upper bound on those with 2 lent questions:
    the filter drops some), of the corpus (W/DOMAIN/coverage.json)."""
    from collections import Counter

    from scopeguard.generation.corpus import corpus_passages
    from scopeguard.generation.lending import SEARCH_DEPTH, LendingConfig, alike_pairs, plan_pairs
    from scopeguard.querylog import LoggedQuestion
    from scopeguard.retrieval import get_retriever

    config = LendingConfig()
    for domain in args.domain or list(DATASETS):
        folder = DATASETS[domain]
        documents = corpus_passages(folder)
        rows = [q for q in read_jsonl(folder / "questions.jsonl") if q["label"] == "in_scope"]
        log = [
            LoggedQuestion(id=q["id"], question=q["question"], line=i, doc_ids=(q["doc_id"],))
            for i, q in enumerate(rows, 1)
        ]
        retriever = get_retriever(config.retriever)
        retriever.index(list(documents))
        k = min(len(documents), SEARCH_DEPTH + config.neighbours + 1)
        hits = retriever.search_batch([q.question for q in log], k=k)
        pairs, skipped = plan_pairs(
            log, [[h.document.id for h in found] for found in hits], documents, config.neighbours
        )
        planned = len(pairs)
        pairs = alike_pairs(pairs, documents, config)
        asked = Counter(p.doc_id for p in pairs)
        result = {
            "logged": len(log),
            "skipped": len(skipped),
            "min_similarity": config.min_similarity,
            "unlike": planned - len(pairs),
            "pairs": len(pairs),
            "corpus": len(documents),
            "asked": len(asked),
            "asked_twice": sum(n >= 2 for n in asked.values()),
        }
        (args.work / domain).mkdir(parents=True, exist_ok=True)
        (args.work / domain / "coverage.json").write_text(json.dumps(result) + "\n")
        print(domain, result)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("step", choices=("draw", "run", "sheet", "coverage", "report"))
    ap.add_argument("--work", type=Path, required=True, help="a folder outside the repository")
    ap.add_argument("--domain", action="append", choices=list(DATASETS), help="repeatable (default: all)")
    ap.add_argument("--seed", type=int, default=1301)
    ap.add_argument("--questions", type=int, default=20, help="draw: logged questions a domain")
    ap.add_argument("--out", type=Path, default=RESULT)
    ap.add_argument(
        "--fresh-from", type=Path, help="draw: an earlier work folder whose logged questions are not drawn"
    )
    args = ap.parse_args()
    if args.step in ("run", "sheet") and not args.domain:
        ap.error(f"{args.step} needs --domain")
    if ROOT in args.work.resolve().parents or args.work.resolve() == ROOT:
        ap.error("--work must be outside the repository (it holds data set text)")
    steps = {"draw": draw, "run": run, "sheet": sheet, "coverage": coverage, "report": report_all}
    steps[args.step](args)


if __name__ == "__main__":
    main()
