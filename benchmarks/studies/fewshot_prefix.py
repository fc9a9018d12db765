"""Worked examples in the primed prefix: does ``answerability_fewshot`` beat ``answerability_verdict``?

Both prompts end the same way and differ only in the instruction before the document, which
llama.cpp reads once per model (the primed prefix): the few-shot one adds nine invented examples
(near-miss unanswerables and questions answered by what a document clearly implies). For each
prompt the same questions are read (margin and the layer-21 state, one decode each, cached like
``benchmarks/studies/reader_extract.py``) and scored the way ``benchmarks/studies/reader_generalisation.py``
scores a configuration: document-grouped CV inside each set and leave-one-dataset-out, accuracy at
P = 0.5 with each set and class weighing the same. The few-shot prompt is worth keeping only if no
left-out set scores lower with it and the worst one scores higher.

    python benchmarks/studies/fewshot_prefix.py [--sets eloq-gold-dev:0,...] [--threads N]

Writes benchmarks/studies/results/fewshot_prefix.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _report
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/studies/: the other studies

from _report import cpu_model, report
from reader_extract import dataset_path, parse_sets, reader
from reader_generalisation import GROUP, evaluate, summarise

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "studies" / "results" / "fewshot_prefix.json"
#: the reader_extract samples, smaller (sample_documents is seeded: these are subsets of those)
SETS = "eloq-gold-dev:0,squad2-train:30,squad2-train-extra:10,subjqa:80,near-miss:0"
TEMPLATES = ("answerability_verdict", "answerability_fewshot")
LAYER = 21
L2 = 300.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--sets", default=SETS)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from scopeguard.data import load_dataset
    from scopeguard.detection.read import Reader
    from scopeguard.detection.signals import Signals, extract_signals, sample_documents

    base: Any = reader(args.model, (LAYER,), args.threads)
    sets = [
        (name, sample_documents(load_dataset(dataset_path(name)), n)) for name, n in parse_sets(args.sets)
    ]
    rows: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for template in TEMPLATES:
        rd = Reader(base.scorer, template=template)  # one model, read with each prompt in turn
        parts = []
        t0 = time.perf_counter()
        for name, ds in sets:
            parts.append(extract_signals(ds, name=name, fast=False, reader=rd, progress=True))
            logging.info("%s %s: %d questions read", template, name, len(ds.questions))
        seconds[template] = round(time.perf_counter() - t0, 1)
        sig = Signals.concat(parts)
        datasets = np.array([GROUP.get(d, d) for d in sig.datasets])
        for spec, l2 in (("margin", 0.01), (f"margin+h{LAYER}", L2)):
            row: dict[str, Any] = {"template": template, "config": spec, "l2": l2}
            row.update(summarise(evaluate(sig, datasets, spec, l2)))
            rows.append(row)
            print(row, flush=True)
        counts = {name: int((datasets == name).sum()) for name in sorted(set(datasets.tolist()))}

    verdicts = {}
    for spec in ("margin", f"margin+h{LAYER}"):
        a, b = (next(r for r in rows if r["template"] == t and r["config"] == spec) for t in TEMPLATES)
        sets_ = [k[: -len("_lodo")] for k in a if k.endswith("_lodo") and k != "worst_lodo"]
        keep = all(b[f"{s}_lodo"] >= a[f"{s}_lodo"] for s in sets_) and b["worst_lodo"] > a["worst_lodo"]
        verdicts[spec] = "few-shot kept" if keep else "few-shot not kept"
    result = {
        "machine": cpu_model(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "model": args.model,
        "sets": args.sets,
        "questions": counts,
        "layer": LAYER,
        "read_seconds": seconds,
        "scoring": "accuracy at P = 0.5, each dataset and class weighing the same in every fit",
        "rule": "kept only if no left-out set scores lower with the examples and the worst one scores higher",
        "verdict": verdicts,
    }
    report(rows, result, args.out)


if __name__ == "__main__":
    main()
