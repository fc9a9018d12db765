"""Per-question latency of the fast stage and the default cascade against a ~300-word document.

    python benchmarks/fast_latency.py [DATASET_DIR] [--detectors fast,default] [--repeats 3] [--threads N]
    python benchmarks/fast_latency.py ../shared/data/squad2-train --detectors fast --cold \
        --min-words 130 --max-words 170          # a new ~150-word document per question

With ``--cold`` every document is new to the detector: the first question about each is timed
once, with no warm-up of its document (the models are loaded first, on an unrelated text).

For each dataset document of 250-350 words, the document side is warmed once (as in a guarded
RAG pipeline where the cache holds the retrieved documents), then every question about it is
timed ``--repeats`` times through ``detector.detect``. Reports p50/p95 over all timings, the
share of escalations, and the 1-minute load average: on a shared machine the figures are
inflated, re-run on a quiet one. ``--threads`` sets torch's intra-op threads (default: torch's
own choice; 1 is often faster on a loaded 2-core box). Writes ``benchmarks/results/fast_latency.json``
(one row per detector, thread setting and mode; a re-run replaces its own rows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from scopeguard.data import load_dataset
from scopeguard.detection.detectors import get_detector
from scopeguard.types import Document

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "eloq-gold-dev"
RESULT = Path(__file__).resolve().parent / "results" / "fast_latency.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--detectors", default="fast,default")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--min-words", type=int, default=250)
    ap.add_argument("--max-words", type=int, default=350)
    ap.add_argument(
        "--cold",
        action="store_true",
        help="time one question per document on a document the detector has not seen (no warm-up: "
        "as in RAG, where each question brings new documents)",
    )
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    ds = load_dataset(args.data)
    docs = {k: d for k, d in ds.documents.items() if args.min_words <= len(d.text.split()) <= args.max_words}
    questions = [q for q in ds.questions if q.doc_id in docs]
    rows = []
    for name in [d.strip() for d in args.detectors.split(",") if d.strip()]:
        det = get_detector(name)
        if args.cold:  # load the models on a text of no dataset, then one question per new document
            det.detect(
                "warm up question?", [Document(text="A warm-up text that shares nothing with the data.")]
            )
            timed = list({q.doc_id: q for q in reversed(questions)}.values())
        else:
            for d in docs.values():  # warm the document cache (and the model)
                det.detect("warm up question?", [d])
            timed = questions
        times, escalated = [], 0
        load_before = os.getloadavg()[0]
        for q in timed:
            for _ in range(1 if args.cold else args.repeats):
                t = time.perf_counter()
                v = det.detect(q.question, [docs[q.doc_id]])
                times.append((time.perf_counter() - t) * 1000)
            escalated += v.escalated
        rows.append(
            {
                "detector": name,
                "documents": len(docs),
                "doc_words_median": float(np.median([len(d.text.split()) for d in docs.values()])),
                "questions": len(timed),
                "mode": "cold" if args.cold else "warm",
                "timings": len(times),
                "p50_ms": float(np.percentile(times, 50)),
                "p95_ms": float(np.percentile(times, 95)),
                "escalated_share": escalated / max(1, len(timed)),
                "load_1min": [load_before, os.getloadavg()[0]],
                "threads": args.threads,
            }
        )
    meta = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(
        f"{'detector':10s} {'mode':5s} {'docs':>5s} {'qs':>4s} "
        f"{'p50 ms':>8s} {'p95 ms':>8s} {'esc':>5s}  load"
    )
    for r in rows:
        print(
            f"{r['detector']:10s} {r['mode']:5s} {r['documents']:5d} {r['questions']:4d} {r['p50_ms']:8.1f} "
            f"{r['p95_ms']:8.1f} {r['escalated_share']:5.0%}  "
            f"{r['load_1min'][0]:.1f}->{r['load_1min'][1]:.1f}"
        )
    print(meta["machine"], meta["date"])
    # keep rows of other (detector, threads) settings from earlier runs
    old = json.loads(RESULT.read_text())["rows"] if RESULT.is_file() else []
    fresh = {(r["detector"], r["threads"], r["mode"]) for r in rows}
    rows = [r for r in old if (r["detector"], r.get("threads"), r.get("mode", "warm")) not in fresh] + [
        {**r, **meta} for r in rows
    ]
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps({"rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
