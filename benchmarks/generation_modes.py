"""Faithful vs efficient generation: LLM calls, tokens, seconds per document, filter survival.

    python benchmarks/generation_modes.py --llm local --docs 2 --work /tmp/genbench

Both modes run on the same documents (the first ``--docs`` documents of the dataset folder, by
default the ELOQ gold dev split in ../shared), each into its own output folder under ``--work``,
with the filter on (``--filter-with``, default auto: the fast detector for a packaged local LLM, else
the judge on the same LLM with ``--judge-votes`` adaptive votes, default 3). Prints a table and writes
``benchmarks/results/generation_modes.json``. Only counts and timings are written, never text.
Re-running with the same ``--work`` resumes (cached documents cost no calls and are reported from
their checkpoints, so the figures stay those of the original run).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

from _report import report

from scopeguard.data import load_dataset
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.llm import from_spec

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "eloq-gold-dev"
RESULT = Path(__file__).resolve().parent / "results" / "generation_modes.json"


def _mode_row(mode: str, out: Path, doc_ids: list[str]) -> dict[str, object]:
    records = [r for r in CheckpointStore(out).load_all().values() if r.doc_id in doc_ids]
    gen_steps = (
        "extract",
        "recover",
        "recover_guesses",
        "remove",
        "oos_questions",
        "oos_questions_each",
        "in_scope_questions",
    )
    gen_calls = [sum(r.usage[s].calls for s in gen_steps if s in r.usage) for r in records]
    filter_calls = [r.usage["filter"].calls if "filter" in r.usage else 0 for r in records]
    tokens = [r.total_usage.total_tokens for r in records]
    kept = sum(r.count("out_of_scope") for r in records)
    filtered = sum(len(r.dropped) for r in records)
    return {
        "mode": mode,
        "docs": len(records),
        "docs_done": sum(r.status == "done" for r in records),
        "generation_calls_per_doc_median": statistics.median(gen_calls) if gen_calls else None,
        "filter_calls_per_doc_median": statistics.median(filter_calls) if filter_calls else None,
        "cached_calls": sum(r.total_usage.cached for r in records),
        "tokens_per_doc_median": statistics.median(tokens) if tokens else None,
        "seconds_per_doc_median": round(statistics.median(r.seconds for r in records), 1)
        if records
        else None,
        "hallucinated_claims": sum(len(r.hallucinated) for r in records),
        "claims_after_remove": sum(len(r.remaining) for r in records),
        "oos_questions_written": kept + filtered,
        "oos_kept": kept,
        "filter_survival": round(kept / (kept + filtered), 3) if kept + filtered else None,
        "in_scope_questions": sum(r.count("in_scope") for r in records),
        "docs_with_oos_and_in_scope": sum(
            r.count("out_of_scope") > 0 and r.count("in_scope") > 0 for r in records
        ),
        "docs_topped_up": sum(any(i.step == "extra_rounds" for i in r.issues) for r in records),
        "unusable_replies": sum(sum(not i.accepted for i in r.issues) for r in records),
        "lenient_accepts": sum(sum(i.reason == "accepted_lenient" for i in r.issues) for r in records),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", default="local")
    ap.add_argument("--docs", type=int, default=2)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-genbench"))
    ap.add_argument("--modes", default="faithful,efficient")
    ap.add_argument("--judge-votes", type=int, default=3, help="votes of the judge filter (paper: 3)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads for local models")
    ap.add_argument(
        "--filter-with", default="auto", help="judge, a detector name, or auto (see scopeguard generate)"
    )
    args = ap.parse_args()
    ds = load_dataset(args.data)
    docs = list(ds.documents.values())[: args.docs]
    doc_ids = [d.id for d in docs]
    rows = []
    load_before = os.getloadavg()[0]
    started = time.time()
    llm_kwargs = {"n_threads": args.threads} if args.threads and args.llm.startswith("local") else {}
    llm = from_spec(args.llm, **llm_kwargs)
    for mode in args.modes.split(","):
        config = GenerationConfig(mode=mode, judge_votes=args.judge_votes)  # type: ignore[arg-type]
        gen = Generator(llm, config=config, judge=args.filter_with, concurrency=1)
        filter_with = gen.filter_name
        gen.run(docs, args.work / mode)
        rows.append(_mode_row(mode, args.work / mode, doc_ids))
    result = {
        "benchmark": "generation_modes",
        "llm": args.llm,
        "llm_kwargs": llm_kwargs,
        "documents": doc_ids,
        "dataset": args.data.name,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, shared "
        f"(load average {load_before:.1f} at start), no GPU",
        "filter_with": filter_with,
        "note": "medians over documents; filter_with judge = the same LLM with "
        f"{args.judge_votes} adaptive vote(s), fast = the offline fast detector (what auto picks for a "
        "packaged local LLM); seconds are those of the run that generated each document",
        "wall_seconds": round(time.time() - started, 1),
    }
    report(rows, result, RESULT)


if __name__ == "__main__":
    main()
