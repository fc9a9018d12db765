"""The offline generation modes with the packaged models: questions and seconds per news document.

    python benchmarks/generation_offline.py --models qwen2.5-coder-0.5b,qwen2.5-coder-1.5b \\
        --modes offline,perturb,followup --docs 6 --mode-docs perturb=3,followup=3 --work /tmp/genoffline

Each (model, mode) runs ``scopeguard generate``'s pipeline (the library's Generator, default
settings of the mode, the auto filter: the packaged logprob detector) on the first ``--docs``
news documents of the ELOQ gold dev split in ../shared (read at run time; ELOQ's length rule, so
each document is cut after 300 words), into its own folder under ``--work``. Prints a table and
writes ``benchmarks/results/generation_offline.json``: per model and mode, in-scope and
out-of-scope questions per document, the share of documents meeting the issue's targets (at least
3 in-scope and 2 out-of-scope questions), seconds per document (the first document includes
loading the models), why candidates were dropped, and the machine (``lscpu`` model name, cores,
threads used), and a summary of the hand labels in ``results/generation_offline_review.json``
(truly unanswerable share; a label counts only where its question's sha256 matches the run's
question under its id). Only counts and timings are
written, never text. ``--timing-from`` takes the
seconds from an earlier run whose cached replies this run replays (after a change to the keep
rule, which costs no new generation). Re-running with the same
``--work`` resumes: finished documents are reported from their checkpoints (their original
seconds).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import statistics
from collections import Counter
from pathlib import Path

from _report import cpu_model, report

from scopeguard.data import read_jsonl
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "eloq-gold-dev"
logger = logging.getLogger("generation_offline")
RESULT = Path(__file__).resolve().parent / "results" / "generation_offline.json"
REVIEW = Path(__file__).resolve().parent / "results" / "generation_offline_review.json"
TARGET_IN_SCOPE, TARGET_OOS, TARGET_SECONDS = 3, 2, 180.0


def _drop_kind(reason: str) -> str:
    """A dropped candidate's reason without its figures ("filter: out of scope within the margin")."""
    return "off-topic" if reason.startswith("off-topic") else reason.split(" (", 1)[0]


def _row(
    model: str, mode: str, records: list[DocumentRecord], timed: dict[str, DocumentRecord] | None = None
) -> dict[str, object]:
    done = [r for r in records if r.status == "done"]
    ins = [r.count("in_scope") for r in done]
    oos = [r.count("out_of_scope") for r in done]
    seconds = [(timed[r.doc_id] if timed and r.doc_id in timed else r).seconds for r in done]
    drops = Counter(_drop_kind(d.reason) for r in done for d in r.dropped if d.label == "out_of_scope")
    kinds = Counter(q.edit_kind for r in done for q in r.questions if q.label == "out_of_scope")
    candidates = sum(oos) + sum(drops.values())
    return {
        "model": model,
        "mode": mode,
        "docs": len(records),
        "done": len(done),
        "in_scope_per_doc": round(statistics.mean(ins), 2) if ins else None,
        "oos_per_doc": round(statistics.mean(oos), 2) if oos else None,
        "docs_meeting_targets": sum(
            i >= TARGET_IN_SCOPE and o >= TARGET_OOS for i, o in zip(ins, oos, strict=True)
        ),
        "seconds_per_doc_median": round(statistics.median(seconds), 1) if seconds else None,
        "seconds_per_doc_max": round(max(seconds), 1) if seconds else None,
        "seconds_per_doc_without_first": round(statistics.mean(seconds[1:]), 1) if len(seconds) > 1 else None,
        "oos_candidates": candidates,
        "oos_kept_share": round(sum(oos) / candidates, 3) if candidates else None,
        "oos_by_kind": dict(sorted(kinds.items(), key=lambda kv: str(kv[0]))),
        "dropped_by_reason": dict(drops.most_common()),
        "unusable_replies": sum(sum(not i.accepted for i in r.issues) for r in records),
        "cached_calls_share": round(
            sum(r.total_usage.cached for r in done) / max(1, sum(r.total_usage.calls for r in done)), 3
        ),
        # the writer's calls (the logprob filter reads with its own model, booked nowhere here)
        "llm_calls_per_doc": round(statistics.mean(r.total_usage.calls for r in done), 1) if done else None,
    }


def question_sha(question: str) -> str:
    """The first 12 hex digits of the question's sha256: ties a hand label to the text it was given for."""
    return hashlib.sha256(question.encode("utf-8")).hexdigest()[:12]


def _review(work: Path) -> dict[str, object]:
    """Summary of the hand labels in REVIEW (``run`` = MODEL/MODE, ``id``, ``question_sha``,
    ``truly_unanswerable``, ``looks_answerable``, ``reason``) for the runs under ``work``.

    Question ids are positions (``DOC_oos_3``), so a run generated again, on another CPU or after a
    change to the keep rules, can give an id to another question: a label counts only where its
    ``question_sha`` matches the question now under its id. Labels without one (written before it
    was recorded) and labels whose question changed are counted apart, never summarised.
    """
    if not REVIEW.is_file():
        return {}
    labels = json.loads(REVIEW.read_text(encoding="utf-8"))
    summary: dict[str, object] = {}
    for run in sorted({lab["run"] for lab in labels}):
        folder = work / run.replace("/", "-")
        if not folder.is_dir():
            continue
        records = CheckpointStore(folder).load_all().values()
        oos = {
            q.id: question_sha(q.question) for r in records for q in r.questions if q.label == "out_of_scope"
        }
        mine = [lab for lab in labels if lab["run"] == run]
        unverified = [lab for lab in mine if "question_sha" not in lab]
        matched = [lab for lab in mine if "question_sha" in lab and oos.get(lab["id"]) == lab["question_sha"]]
        stale = len(mine) - len(unverified) - len(matched)
        if stale or unverified:
            logger.warning(
                "%s: %d label(s) of %s are for other questions than this run's (%d without a question_sha)",
                REVIEW.name,
                stale + len(unverified),
                run,
                len(unverified),
            )
        truly = [lab for lab in matched if lab["truly_unanswerable"]]
        summary[run] = {
            "labelled": len(matched),
            "of_kept": len(oos),
            "labels_for_other_questions": stale,
            "labels_without_question_sha": len(unverified),
            "truly_unanswerable_share": round(len(truly) / len(matched), 3) if matched else None,
            "looks_answerable_share_of_unanswerable": round(
                sum(lab["looks_answerable"] for lab in truly) / len(truly), 3
            )
            if truly
            else None,
        }
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    ap.add_argument("--modes", default="offline,perturb,followup")
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--mode-docs", default="", help="MODE=N,...: another number of documents for a mode")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-generation-offline"))
    ap.add_argument(
        "--timing-from",
        type=Path,
        default=None,
        help="take each document's seconds from this earlier --work (a replay of its cached replies)",
    )
    ap.add_argument(
        "--note", default="", help="recorded with the figures (e.g. whether the machine was shared)"
    )
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()

    from scopeguard.llm.local import LlamaCppChatModel

    threads = args.threads or os.cpu_count() or 1
    os.environ["SCOPEGUARD_N_THREADS"] = str(threads)  # the logprob detector's model too
    docs = [{"doc_id": d["doc_id"], "text": d["text"]} for d in read_jsonl(args.data / "documents.jsonl")]
    per_mode = {m: int(n) for m, n in (item.split("=") for item in args.mode_docs.split(",") if item)}
    rows = []
    for model in args.models.split(","):
        llm = LlamaCppChatModel(model, n_threads=threads)
        for mode in args.modes.split(","):
            out = args.work / f"{model}-{mode}"
            chosen = docs[: per_mode.get(mode, args.docs)]
            Generator(llm, config=GenerationConfig(mode=mode), progress=False).run(chosen, out)  # type: ignore[arg-type]
            records = [r for r in CheckpointStore(out).load_all().values()]
            timed = (
                CheckpointStore(args.timing_from / f"{model}-{mode}").load_all() if args.timing_from else None
            )
            rows.append(_row(model, mode, sorted(records, key=lambda r: r.order), timed))
    machine = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": threads,
        "python": platform.python_version(),
        "note": args.note,
        "seconds_from": str(args.timing_from) if args.timing_from else "this run",
    }
    report(
        rows,
        {
            "benchmark": "generation_offline",
            "data": f"{args.data.name}: the first {args.docs} documents (news; "
            f"{args.mode_docs or 'every mode'}), cut after 300 words",
            "filter": "auto (the packaged logprob detector, Qwen2.5-Coder-1.5B)",
            "targets": {
                "in_scope_per_doc": TARGET_IN_SCOPE,
                "oos_per_doc": TARGET_OOS,
                "seconds_per_doc": TARGET_SECONDS,
            },
            "machine": machine,
            "review": _review(args.work),
        },
        args.out,
    )


if __name__ == "__main__":
    main()
