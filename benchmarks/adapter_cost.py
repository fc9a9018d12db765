"""What a tuned reader's GGUF LoRA adapter costs llama.cpp: the ``logprob`` detector through the bare
base and through a tuned reader's folder, on the same fresh prompts (one question per document, no
kept document states), timed back to back in alternating order.

    python benchmarks/adapter_cost.py READER_FOLDER [READER_FOLDER ...] [--prompts 26]

The target (#36): an adapter applied by llama.cpp costs at most 10% over the bare base. Prints the
table and writes ``benchmarks/results/adapter_cost.json``, each row with the machine and date it was
timed on (a reader not timed again keeps its recorded row).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import cpu_model, earlier_rows, report

from scopeguard.data import load_dataset
from scopeguard.detection.detectors import get_detector

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "adapter_cost.json"
SETS = [
    ROOT / "benchmarks/data/implied",
    ROOT / "benchmarks/data/near-miss",
    ROOT.parent / "shared/data/squad2-train",
]


def _prompts(limit: int) -> list[tuple[str, str]]:
    """One (question, document) per document, so that no document's state is kept between reads."""
    items = []
    for path in SETS:
        if not path.is_dir():
            continue
        ds = load_dataset(path)
        seen: set[str] = set()
        for q in ds.questions:
            if q.doc_id not in seen:
                seen.add(q.doc_id)
                items.append((q.question, ds.documents[q.doc_id].text))
    return items[:limit]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("readers", nargs="+", type=Path, help="tuned readers' folders (train-reader --out)")
    ap.add_argument("--prompts", type=int, default=26)
    args = ap.parse_args()
    items = _prompts(args.prompts)
    rows: list[dict[str, Any]] = []
    for folder in args.readers:
        config = json.loads((folder / "reader.json").read_text())
        base = config.get("base", "qwen2.5-coder-0.5b")
        bare = get_detector("logprob", reader=f"local:{base}")
        tuned = get_detector("logprob", reader=f"local:{folder}")
        for det in (bare, tuned):
            det.detect("Is this a warm-up?", ["A warm-up."])  # loads (and the loader's one-off checks)
        times: dict[str, list[float]] = {"bare": [], "tuned": []}
        for i, (question, document) in enumerate(items):
            order = [("bare", bare), ("tuned", tuned)]
            for name, det in order if i % 2 == 0 else order[::-1]:
                started = time.perf_counter()
                det.detect(question, [document])
                times[name].append(time.perf_counter() - started)
        ratios = [t / b for t, b in zip(times["tuned"], times["bare"], strict=True)]
        rows.append(
            {
                "reader": folder.name,
                "base": base,
                "adapt": config.get("adapt", "all"),
                "prompts": len(items),
                "bare_ms_p50": round(statistics.median(times["bare"]) * 1000, 1),
                "tuned_ms_p50": round(statistics.median(times["tuned"]) * 1000, 1),
                "ratio_p50": round(statistics.median(ratios), 3),
                "ratio_min_max": [round(min(ratios), 3), round(max(ratios), 3)],
            }
        )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{cpu_model()}, {os.cpu_count()} cores"
    rows = [{**row, "machine": machine, "date": when} for row in rows]
    # a reader not timed this time keeps its recorded row, with the machine and date it was timed on
    kept, earlier = earlier_rows(RESULT, {row["reader"] for row in rows}, key="reader")
    kept = [
        {
            **row,
            "machine": row.get("machine", earlier.get("machine")),
            "date": row.get("date", earlier.get("date")),
        }
        for row in kept
    ]
    report(kept + rows, {"machine": machine, "date": when}, RESULT)


if __name__ == "__main__":
    main()
