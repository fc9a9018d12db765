"""LoRA-tuning the reader, measured the way held-out sets judge it: runs of ``train_reader`` side by
side (an optimisation sweep, or one fold per left-out dataset), each set's AUROC, accuracy and
false refusals at the reader's own threshold before and after, and the worst left-out score.

    # a learning-rate sweep on small runs (validation = held-out documents; --eval sets never trained on)
    python benchmarks/reader_tuning.py sweep --base qwen2.5-coder-0.5b \\
        --train ../shared/data/squad2-train ../shared/data/eloq-gold-dev ../shared/data/subjqa \\
        --eval benchmarks/data/near-miss benchmarks/data/implied \\
        --runs lr3e-5:lr=3e-5 lr1e-4:lr=1e-4 lr3e-4:lr=3e-4 --set batch=8 max_questions=480 --work /tmp/tune

    # leave one dataset out: one run per dataset, trained on the others, scored on it
    python benchmarks/reader_tuning.py lodo --base qwen2.5-coder-0.5b --train A B C --set lr=1e-4 \\
        --work /tmp/lodo

Each run is a ``train-reader`` run folder under ``--work``: a killed benchmark resumes every run
where it stopped (``--resume`` is implied), and a finished run is read back, not trained again.
Writes ``--out`` (JSON) and prints the table. Timings are the machine's: the JSON names it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine_info

from scopeguard.data import atomic_write_json
from scopeguard.detection.tune import TuneConfig, train_reader
from scopeguard.detection.tune.train import CURVE_FILE

RESULTS = Path(__file__).resolve().parent / "results"


def _settings(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fields = TuneConfig.model_fields
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if key not in fields:
            raise SystemExit(f"unknown setting {key!r}; valid: {', '.join(fields)}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _run(name: str, config: TuneConfig, work: Path, threads: int | None) -> dict[str, Any]:
    folder = work / name
    resume = (folder / "checkpoint" / "state.pt").is_file()
    if (folder / "reader.json").is_file():
        logging.info("%s: finished earlier, read back", name)
        curve = json.loads((folder / CURVE_FILE).read_text())
        first, last = curve["validation"][0], curve["validation"][-1]
        keep = [k for k in last if ":" in k]
        return {"before": {k: first[k] for k in keep}, "after": {k: last[k] for k in keep}, "curve": curve}
    report = train_reader(config, folder, resume=resume, threads=threads, progress=False)
    assert report is not None
    curve = json.loads((folder / CURVE_FILE).read_text())
    return {"before": report.before, "after": report.after, "curve": curve, "seconds": report.seconds}


def _table(rows: dict[str, dict[str, Any]]) -> None:
    print(f"{'run':<16} {'set':<34} {'n':>4} {'AUROC':>13} {'accuracy':>13} {'FR':>6}")
    for name, row in rows.items():
        for key, after in row["after"].items():
            before = row["before"].get(key, {})
            print(
                f"{name:<16} {key:<34} {int(after['n']):>4} "
                f"{before.get('auroc', float('nan')):>6.3f}>{after['auroc']:<6.3f} "
                f"{before.get('accuracy', float('nan')):>6.3f}>{after['accuracy']:<6.3f} "
                f"{after['false_refusal_rate']:>6.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["sweep", "lodo"])
    parser.add_argument("--base", default="qwen2.5-coder-0.5b")
    parser.add_argument("--train", nargs="+", required=True, help="training dataset folders")
    parser.add_argument("--eval", nargs="*", default=[], help="datasets scored but never trained on")
    parser.add_argument("--runs", nargs="*", default=[], help="sweep: NAME:key=value,key=value ...")
    parser.add_argument("--set", nargs="*", default=[], help="settings shared by every run (key=value)")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    shared = {"base": args.base, **_settings(args.set)}
    runs: dict[str, TuneConfig] = {}
    if args.mode == "sweep":
        for spec in args.runs or ["base:"]:
            name, _, pairs = spec.partition(":")
            extra = _settings([p for p in pairs.split(",") if p])
            runs[name] = TuneConfig(datasets=args.train, evaluate=args.eval, **{**shared, **extra})
    else:
        for left in args.train:
            rest = [d for d in args.train if d != left]
            runs[f"without-{Path(left).name}"] = TuneConfig(
                datasets=rest, evaluate=[left, *args.eval], **shared
            )
    rows = {name: _run(name, config, args.work, args.threads) for name, config in runs.items()}
    _table(rows)
    result = {
        "machine": machine_info(),
        "mode": args.mode,
        "runs": {name: {"config": runs[name].model_dump(), **row} for name, row in rows.items()},
    }
    if args.mode == "lodo":
        left_out = {
            name: row["after"][f"evaluation:{Path(cfg.evaluate[0]).name}"]
            for (name, row), cfg in zip(rows.items(), runs.values(), strict=True)
        }
        result["worst_left_out_accuracy"] = min(v["accuracy"] for v in left_out.values())
        result["worst_left_out_auroc"] = min(v["auroc"] for v in left_out.values())
        print(
            f"worst left-out accuracy {result['worst_left_out_accuracy']:.3f}, "
            f"AUROC {result['worst_left_out_auroc']:.3f}"
        )
    out = args.out or RESULTS / f"reader_tuning_{args.mode}.json"
    atomic_write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
