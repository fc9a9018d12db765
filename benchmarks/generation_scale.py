"""The generator's own overhead at scale: thousands of documents through a fake LLM with a set latency.

    python benchmarks/generation_scale.py --docs 2000 --latency 0.02 --concurrency 16 --work /tmp/genscale

The LLM is scopeguard's ELOQ-shaped fake (``scopeguard.testing.EloqChatModel``: well-formed replies, an
LLM-judge filter) behind an async API that waits ``--latency`` seconds per call (like a remote
endpoint: calls overlap up to ``--concurrency`` documents), so what is measured is scopeguard's
machinery: scheduling, parsing, the reply cache, one checkpoint per document, the output files.
Three runs on the same ``--work`` folder:

1. fresh, on the first 90% of the documents;
2. the same command again (everything resumed: no call, how long does reading the folder take);
3. all documents (only the new 10% run; the rest is resumed).

Prints a table and writes ``benchmarks/results/generation_scale.json`` (timings, calls, peak memory,
folder sizes; no text).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import time
from pathlib import Path

from _report import report

from scopeguard.generation import GenerationConfig, Generator
from scopeguard.testing import EloqChatModel, invented_document

RESULT = Path(__file__).resolve().parent / "results" / "generation_scale.json"


def _size_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 2)


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.02, help="seconds per fake LLM call")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--mode", default="faithful", choices=("faithful", "efficient"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-genscale"))
    args = ap.parse_args()
    if args.work.exists():
        shutil.rmtree(args.work)
    docs = [{"doc_id": f"doc{i:05d}", "text": invented_document(f"plan-{i}")} for i in range(args.docs)]
    first = docs[: int(args.docs * 0.9)]
    # the fake behind a non-blocking wait, as an async HTTP backend; its own call log is not kept
    llm = EloqChatModel(latency=args.latency, keep_calls=False)
    config = GenerationConfig(mode=args.mode)  # type: ignore[arg-type]
    rows = []
    for name, corpus in (("fresh 90%", first), ("same again", first), ("all (new 10%)", docs)):
        gen = Generator(llm, config=config, concurrency=args.concurrency, progress=False)
        started, cpu_start = time.perf_counter(), time.process_time()
        summary = gen.run(corpus, args.work)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_start
        rows.append(
            {
                "run": name,
                "docs_in_corpus": len(corpus),
                "docs_done_run": summary.docs_done_run,
                "docs_resumed": summary.docs_resumed,
                "llm_calls_run": summary.usage_run.calls,
                "wall_s": round(wall, 1),
                "docs_per_s": round(summary.docs_done_run / wall, 1) if summary.docs_done_run else None,
                "llm_wait_s_per_doc": round(
                    summary.usage_run.calls * args.latency / max(1, summary.docs_done_run), 2
                ),
                "cpu_ms_per_doc": round(1000 * cpu / summary.docs_done_run, 1)
                if summary.docs_done_run
                else None,
                "questions_total": summary.oos_kept + summary.in_scope,
                "peak_rss_mb": _peak_rss_mb(),
                "folder_mb": _size_mb(args.work),
            }
        )
    ids = [json.loads(line)["id"] for line in (args.work / "questions.jsonl").open()]
    print(f"{len(ids)} questions, {len(set(ids))} unique ids")
    result = {
        "benchmark": "generation_scale",
        "docs": args.docs,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "mode": args.mode,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, load average "
        f"{os.getloadavg()[0]:.1f} at the end, no GPU",
        "note": "fake LLM (scopeguard.testing.EloqChatModel) behind an async wait of latency_s per call; the "
        "LLM-judge filter is on (the fake answers it). cpu_ms_per_doc = this process's CPU time per "
        "generated document (scopeguard's machinery plus the fake's regexes)",
        "questions": len(ids),
        "unique_question_ids": len(set(ids)),
    }
    report(rows, result, RESULT)


if __name__ == "__main__":
    main()
