"""A guard beside another reading process on the same cores: the wait with and without core sharing.

    python benchmarks/cpu_sharing.py [--questions 20] [--threads N]

A guard on a CPU usually shares it: a local LLM, a second worker, a batch job. Here the other
process is a second reader (the packaged ``default`` detector in its own process, reading a new
250-word chunk again and again, as ``scopeguard preread`` of another corpus does). Back to back, in
this order, the guard checks ``--questions`` questions against 4 pre-read chunks (ELOQ news
windows, as ``known_chunks.py``) through ``Guard.check``:

* **alone**: no other process;
* **beside, not shared**: the other reader running, both with ``SCOPEGUARD_CPU_SHARE=off``
  (every read on all the cores, as before);
* **beside, shared**: the same with core sharing on (the default: each read's threads capped at
  the cores the other processes leave free, ``scopeguard.llamacpp`` ``_share``).

Each row gives the guard's median, p90 and worst seconds a question, the ratio of its median to
the alone row, and the other reader's pace over the same time (chunks a minute), so a fair share
shows on both sides: on 2 cores a fair share is about 2x alone for each. Writes
``benchmarks/results/cpu_sharing.json`` (figures and ids only) with the CPU named.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import eloq_windows, p90, report, run_header

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "eloq-gold-dev"
RESULT = ROOT / "benchmarks" / "results" / "cpu_sharing.json"
WORDS = 250


def other_reader(count_file: Path) -> None:
    """The other process: read a chunk no one has read, again and again; count them in ``count_file``."""
    from scopeguard import Guard
    from scopeguard.types import Document

    windows = eloq_windows(DATA, WORDS)
    guard = Guard(detector="default")
    i = 0
    while True:
        doc_id, text = windows[i % len(windows)]
        guard.check("What happened?", [Document(text=f"(pass {i}) {text}", id=f"{doc_id}-{i}")])
        i += 1
        count_file.write_text(f"{i} {time.time()}\n", encoding="ascii")


def _count(path: Path) -> tuple[int, float]:
    try:
        n, t = path.read_text(encoding="ascii").split()
        return int(n), float(t)
    except (OSError, ValueError):
        return 0, time.time()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--threads", type=int, default=None, help="$SCOPEGUARD_N_THREADS (default: all cores)")
    ap.add_argument("--out", type=Path, default=RESULT)
    ap.add_argument("--other-reader", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not (DATA / "documents.jsonl").is_file():
        raise SystemExit(f"needs the shared ELOQ dev set at {DATA}")
    if args.threads:
        os.environ["SCOPEGUARD_N_THREADS"] = str(args.threads)
    if args.other_reader is not None:
        other_reader(args.other_reader)
        return
    os.environ["SCOPEGUARD_CACHE"] = tempfile.mkdtemp(prefix="scopeguard-cpu-sharing-")

    from scopeguard import Guard
    from scopeguard.llamacpp import CPU_SHARE_ENV
    from scopeguard.types import Document

    windows = eloq_windows(DATA, WORDS)
    chunks = [Document(text=text, id=doc_id) for doc_id, text in windows[:4]]
    ids = {c.id for c in chunks}
    rows_q = [json.loads(line) for line in (DATA / "questions.jsonl").open(encoding="utf-8")]
    # each question once (a question read before against the same chunks is kept and costs nothing):
    # those on the chunks first, then others (as costly to read, and out of scope here)
    asked = [q["question"] for q in rows_q if q["doc_id"] in ids] + [
        q["question"] for q in rows_q if q["doc_id"] not in ids
    ]
    runs = ("alone", "beside, not shared", "beside, shared")
    need = len(runs) * args.questions
    if len(asked) < need:
        raise SystemExit(f"{len(asked)} questions, {need} needed: lower --questions")

    guard = Guard(detector="default")
    guard.preread(chunks, progress=False)  # also loads the model; not timed

    seconds: dict[str, list[float]] = {}
    pace: dict[str, float | None] = {}
    for r, run in enumerate(runs):
        shared = run != "beside, not shared"
        os.environ[CPU_SHARE_ENV] = "on" if shared else "off"
        other = None
        count_file = Path(tempfile.mkstemp(prefix="scopeguard-other-reader-")[1])
        if run != "alone":
            env = {**os.environ, "SCOPEGUARD_CACHE": tempfile.mkdtemp(prefix="scopeguard-other-")}
            other = subprocess.Popen([sys.executable, __file__, "--other-reader", str(count_file)], env=env)
            while _count(count_file)[0] < 2:  # loaded and reading
                if other.poll() is not None:
                    raise SystemExit("the other reader stopped")
                time.sleep(0.5)
        start_n, start_t = _count(count_file)
        questions = asked[r :: len(runs)][: args.questions]  # every run the same mix of questions
        times = []
        for question in questions:
            t0 = time.perf_counter()
            guard.check(question, chunks)
            times.append(time.perf_counter() - t0)
        seconds[run] = times
        if other is not None:
            end_n, end_t = _count(count_file)
            other.terminate()
            other.wait(timeout=30)
            pace[run] = round(60 * (end_n - start_n) / max(end_t - start_t, 1e-6), 2)
        else:
            pace[run] = None
        count_file.unlink(missing_ok=True)

    alone = statistics.median(seconds["alone"])
    rows = []
    for run, times in seconds.items():
        ordered = sorted(times)
        rows.append(
            {
                "run": run,
                "questions": len(times),
                "median_s": round(statistics.median(times), 3),
                "p90_s": round(p90(times), 3),
                "max_s": round(ordered[-1], 3),
                "x_alone": round(statistics.median(times) / alone, 2),
                "other_chunks_per_min": pace[run],
            }
        )
    result = {
        **run_header("cpu_sharing"),
        "threads": os.environ.get("SCOPEGUARD_N_THREADS", "all"),
        "detector": "default",
        "chunk_words": WORDS,
        "documents": sorted(ids),
        "seconds": seconds,
    }
    report(rows, result, args.out)


if __name__ == "__main__":
    main()
