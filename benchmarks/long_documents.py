"""Time and memory of the ``fast`` and ``lexical`` detectors on long documents (issue #15 item 4).

    python benchmarks/long_documents.py [--sizes 1000,20000,200000,500000,2000000] [--threads 1]

For each size a synthetic document is generated from invented sentences (fixed seed; no dataset
text), and each detector checks one question against it in a fresh child process (so that the
peak RSS of one row is not the peak of an earlier one). The detector is built and warmed on a
short text first; then the timed ``detect`` runs with a cold document cache. For ``fast``, a
second question against the same document shows the cached document side. A document over the
detector's ``max_chars`` is refused with :class:`~scopeguard.errors.DocumentTooLongError`.

Columns: ``wall_s`` (the detect call), ``cpu_s`` (CPU seconds of that call: close to what one
quiet core would take when the machine is shared), ``again_s`` (a second question, fast only),
``peak_rss_mb`` (the child's peak resident memory) and ``rss_growth_mb`` (peak minus the peak
after loading and warming the detector). Writes ``benchmarks/results/long_documents.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _report import report

RESULT = Path(__file__).resolve().parent / "results" / "long_documents.json"
QUESTION = "Which tidal barrier did the harbour council of Quellmoor approve after the public hearing?"

# Invented vocabulary (no dataset text): sentences are drawn from these with a fixed seed.
_SUBJECTS = (
    "The harbour council of Quellmoor",
    "Engineer Talia Voss",
    "The Ormsby weaving cooperative",
    "A survey team from Lindenfall",
    "The river authority",
    "Professor Idris Calloway",
    "The night market traders",
    "The Brackwater school board",
    "Inspector Rhea Dunmore",
    "The glassworks union",
    "Mayor Oskar Pellingham",
    "The tram drivers of Fenwick",
)
_VERBS = (
    "approved",
    "rejected",
    "postponed",
    "studied",
    "funded",
    "criticised",
    "inspected",
    "announced",
    "expanded",
    "repaired",
    "redesigned",
    "questioned",
)
_OBJECTS = (
    "a new tidal barrier",
    "the northern tram line",
    "a seed library",
    "the old lighthouse",
    "a solar kiln for the potters",
    "the flood maps of the lower town",
    "a ferry timetable",
    "the copper bridge",
    "a winter shelter",
    "the orchard canal",
    "a reading room for sailors",
    "the salt warehouse",
)
_TAILS = (
    "after a long public hearing",
    "despite objections from the fishing families",
    "for the third time this decade",
    "with a budget of {n} thousand crowns",
    "before the spring thaw",
    "following {n} written complaints",
    "in the eastern district",
    "at the request of {n} residents",
    "while the harbour was closed for repairs",
    "although the weather office warned of storms in the first week of {month}",
)
_MONTHS = ("March", "April", "May", "June", "October", "November")
_CLAUSES = (
    "and the decision was welcomed by the merchants",
    "but the minutes of the meeting were not published",
    "so that the work could begin in {month}",
    "because the previous plan had cost {n} thousand crowns more than expected",
)


COLUMNS = (
    *("size", "chars", "detector", "outcome"),
    *("wall_s", "cpu_s", "again_s", "peak_rss_mb", "rss_growth_mb"),
)


def synthetic_document(n_chars: int, *, seed: int = 15) -> str:
    """About ``n_chars`` characters of invented prose: paragraphs of 3-8 sentences of varied length."""
    rng = random.Random(seed)
    paragraphs: list[str] = []
    size = 0
    while size < n_chars:
        sentences = []
        for _ in range(rng.randint(3, 8)):
            parts = [rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS), rng.choice(_TAILS)]
            parts += [rng.choice(_CLAUSES) for _ in range(rng.choice((0, 0, 1, 2)))]
            text = " ".join(parts).format(n=rng.randint(2, 999), month=rng.choice(_MONTHS))
            sentences.append(text + ".")
        paragraphs.append(" ".join(sentences))
        size += len(paragraphs[-1]) + 2
    return "\n\n".join(paragraphs)[:n_chars]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def child(size: int, name: str) -> dict[str, Any]:
    """One row, measured in this (fresh) process (torch reads its thread count from OMP_NUM_THREADS)."""
    from scopeguard.detection.detectors import get_detector
    from scopeguard.errors import DocumentTooLongError

    det = get_detector(name)
    det.detect("Is this a warm-up question?", "A short warm-up text about a lighthouse keeper.")
    text = synthetic_document(size)
    base_rss = _peak_rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    again: float | None = None
    try:
        v = det.detect(QUESTION, text)
        outcome = f"{v.label} ({v.score:.2f})"
    except DocumentTooLongError as exc:
        outcome = f"refused (limit {exc.limit:,})"
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if name == "fast" and not outcome.startswith("refused"):
        t = time.perf_counter()
        det.detect("When did Mayor Oskar Pellingham inspect the copper bridge?", text)
        again = round(time.perf_counter() - t, 3)
    peak = _peak_rss_mb()
    return {
        "size": f"{size / 1000:g} KB" if size < 1_000_000 else f"{size / 1e6:g} MB",
        "chars": len(text),
        "detector": name,
        "outcome": outcome,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "again_s": again,
        "peak_rss_mb": round(peak),
        "rss_growth_mb": round(peak - base_rss),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,20000,200000,500000,2000000", help="characters, comma-separated")
    ap.add_argument("--detectors", default="fast,lexical")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per row before giving up")
    ap.add_argument("--child", nargs=2, metavar=("SIZE", "DETECTOR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), args.child[1])))
        return

    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
        for name in [d.strip() for d in args.detectors.split(",") if d.strip()]:
            cmd = [sys.executable, __file__, "--child", str(size), name]
            env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
            except subprocess.TimeoutExpired:
                rows.append({"size": size, "detector": name, "outcome": f"no answer in {args.timeout:g} s"})
                continue
            if done.returncode:
                raise SystemExit(f"child {size} {name} failed:\n{done.stderr[-3000:]}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    meta = {
        "question": QUESTION,
        "threads": args.threads,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {version('torch')}",
        "load_1min": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    rows = [{k: r.get(k) for k in COLUMNS} for r in rows]
    report(rows, meta, RESULT)
    print(meta["machine"], "| load", meta["load_1min"], "|", meta["date"])


if __name__ == "__main__":
    main()
