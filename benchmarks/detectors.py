"""ELOQ Figure 2 as a table: every out-of-scope detector on the dev set.

    python benchmarks/detectors.py [DATASET_DIR] --detectors lexical,fast,default,nli,probe,judge
    python benchmarks/detectors.py --detectors probe@gemma3-270m --latency-sample 10

Columns: accuracy with a 95% bootstrap CI (2000 resamples over questions, seed 0), AUROC, latency
p50/p95 per question, escalated share (cascade), peak RSS of the process that ran the row.

* Detectors with nothing trained on the dev set (lexical, judge) are run live on every question
  (``--limit`` caps it).
* Learned detectors are never scored on their training data: ``fast`` and ``default`` use the
  out-of-fold predictions of 5-fold document-grouped cross-validation (seed 0) of their heads
  (features from ``benchmarks/train_fast_head.py``'s cache; the cascade is replayed on the
  out-of-fold scores of both stages with the shipped band); ``nli`` and ``probe[@LLM]`` use
  ``scopeguard.training.cross_validate``. ``cascade@mpnet`` replays a fast -> fast-on-mpnet cascade
  on out-of-fold scores for several escalation bands (accuracy only), the measurement behind
  the choice of the default. Their latency comes from a live run of the shipped (or a
  freshly trained) head on ``--latency-sample`` questions (all for fast/default).

Each row runs in its own subprocess (so that peak RSS is the row's) and is cached in
``benchmarks/results/detectors/<row>.json``; ``--refresh`` recomputes the rows named. The combined
table goes to ``benchmarks/results/detectors.json``. Latencies depend on machine load: the
``load`` column records the 1-minute load average when the row was measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scopeguard.data import Dataset, load_dataset
from scopeguard.detectors import get_detector
from scopeguard.evaluation.detection import (
    bootstrap_ci,
    correctness,
    detection_metrics,
    run_detector,
)
from scopeguard.types import Label, Verdict

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "eloq-gold-dev"
RESULTS = Path(__file__).resolve().parent / "results"
ROW_DIR = RESULTS / "detectors"
ORDER = ("lexical", "fast", "default", "cascade", "nli", "probe", "judge")


def _oof_verdicts(scores: np.ndarray, threshold: float = 0.5) -> list[Verdict]:
    out = []
    for p in scores:
        label: Label = "out_of_scope" if p >= threshold else "in_scope"
        out.append(Verdict(label=label, score=float(np.clip(p, 0, 1))))
    return out


def _fast_oof(data: Path, encoder: str) -> tuple[np.ndarray, list[str]]:
    import train_fast_head as tfh

    x, y, groups, _ = tfh.compute_features(data, encoder)
    return tfh.cross_validate(x, y, groups, c=1.0, folds=5, seed=0), [
        "out_of_scope" if v else "in_scope" for v in y
    ]


def _row_fast(name: str, ds: Dataset, data: Path, limit: int | None, sample: int) -> dict[str, Any]:
    from scopeguard.detectors.cascade import CascadeDetector
    from scopeguard.detectors.fast import FastDetector

    det = get_detector(name)
    _, live = run_detector(det, ds, limit=limit)
    p1, y = _fast_oof(data, "minilm")
    extra: dict[str, Any] = {}
    if isinstance(det, FastDetector):  # the shipped default is the fast stage alone
        verdicts = _oof_verdicts(p1)
    elif isinstance(det, CascadeDetector) and isinstance(det.second, FastDetector):
        p2, _ = _fast_oof(data, det.second.head.encoder)
        esc = (p1 > det.low) & (p1 < det.high)
        verdicts = _oof_verdicts(np.where(esc, p2, p1))
        extra = {"band": [det.low, det.high], "escalated_share_cv": float(esc.mean())}
    else:
        raise SystemExit("the default row replays fast or a fast->fast cascade only")
    m = detection_metrics(y, verdicts)
    lat = detection_metrics([ds.questions[i].label for i in range(len(live))], live)
    return {
        **_acc(y, verdicts, m),
        "accuracy_source": "5-fold document-grouped CV (seed 0), out-of-fold",
        "latency_ms_p50": lat["latency_ms_p50"],
        "latency_ms_p95": lat["latency_ms_p95"],
        "latency_n": len(live),
        "escalated_share": lat["escalated_share"],
        "live_accuracy_trained_on_dev": lat["accuracy"],
        **extra,
    }


def _row_cascade_replay(name: str, ds: Dataset, data: Path, limit: int | None, sample: int) -> dict[str, Any]:
    """``cascade@ENCODER``: fast (MiniLM) -> the same features on ENCODER, replayed on out-of-fold
    scores for several escalation bands (accuracy only; no live latency)."""
    encoder = name.partition("@")[2] or "mpnet"
    p1, y = _fast_oof(data, "minilm")
    p2, _ = _fast_oof(data, encoder)
    yy = np.array([v == "out_of_scope" for v in y])
    bands = []
    for lo, hi in ((0.3, 0.7), (0.25, 0.75), (0.2, 0.8), (0.1, 0.9), (0.0, 1.0)):
        esc = (p1 > lo) & (p1 < hi)
        pc = np.where(esc, p2, p1)
        bands.append(
            {
                "band": [lo, hi],
                "escalated": float(esc.mean()),
                "accuracy": float(((pc >= 0.5) == yy).mean()),
                "first_on_band": float(((p1[esc] >= 0.5) == yy[esc]).mean()) if esc.any() else None,
                "second_on_band": float(((p2[esc] >= 0.5) == yy[esc]).mean()) if esc.any() else None,
            }
        )
    lo, hi = 0.25, 0.75
    esc = (p1 > lo) & (p1 < hi)
    verdicts = _oof_verdicts(np.where(esc, p2, p1))
    m = detection_metrics(y, verdicts)
    return {
        **_acc(y, verdicts, m),
        "accuracy_source": f"CV replay, band {lo}-{hi}, second stage = fast features on {encoder}",
        "latency_ms_p50": float("nan"),
        "latency_ms_p95": float("nan"),
        "latency_n": 0,
        "escalated_share": float(esc.mean()),
        "bands": bands,
    }


def _row_learned(name: str, ds: Dataset, data: Path, limit: int | None, sample: int) -> dict[str, Any]:
    from scopeguard.training import cross_validate, train_detector

    base, _, llm = name.partition("@")
    kw = {"llm": llm} if llm else {}
    verdicts = cross_validate(ds, base, folds=5, seed=0, **kw)
    y = [q.label for q in ds.questions]
    m = detection_metrics(y, verdicts)
    with tempfile.TemporaryDirectory() as tmp:
        head = train_detector(ds, base, Path(tmp) / "head", seed=0, **kw)
        det = get_detector(base, model=head)
        _, live = run_detector(det, ds, limit=sample)
    lat = detection_metrics([q.label for q in ds.questions[: len(live)]], live)
    return {
        **_acc(y, verdicts, m),
        "accuracy_source": "5-fold document-grouped CV (seed 0), out-of-fold",
        "latency_ms_p50": lat["latency_ms_p50"],
        "latency_ms_p95": lat["latency_ms_p95"],
        "latency_n": len(live),
        "escalated_share": 0.0,
    }


def _row_live(name: str, ds: Dataset, data: Path, limit: int | None, sample: int) -> dict[str, Any]:
    y, verdicts = run_detector(get_detector(name), ds, limit=limit)
    m = detection_metrics(y, verdicts)
    return {
        **_acc(y, verdicts, m),
        "accuracy_source": "live (nothing trained on this data)",
        "latency_ms_p50": m["latency_ms_p50"],
        "latency_ms_p95": m["latency_ms_p95"],
        "latency_n": len(verdicts),
        "escalated_share": m["escalated_share"],
        "unknown_rate": m["unknown_rate"],
    }


def _acc(y: list[str], verdicts: list[Verdict], m: dict[str, float]) -> dict[str, Any]:
    lo, hi = bootstrap_ci(correctness(y, verdicts), n_resamples=2000, seed=0)
    return {"n": len(y), "accuracy": m["accuracy"], "ci_low": lo, "ci_high": hi, "auroc": m["auroc"]}


def run_row(row: str, data: Path, limit: int | None, sample: int) -> dict[str, Any]:
    ds = load_dataset(data)
    base = row.partition("@")[0]
    fn = {
        "fast": _row_fast,
        "default": _row_fast,
        "cascade": _row_cascade_replay,
        "nli": _row_learned,
        "probe": _row_learned,
    }.get(base, _row_live)
    started = time.time()
    out = fn(row, ds, data, limit, sample)
    return {
        "detector": row,
        **out,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": round(time.time() - started, 1),
        "load": os.getloadavg()[0],
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _table(rows: list[dict[str, Any]]) -> str:
    head = f"{'detector':22s} {'acc':>6s} {'95% CI':>13s} {'AUROC':>6s} {'p50 ms':>9s} {'p95 ms':>9s} "
    head += f"{'esc':>5s} {'RSS MB':>7s} {'load':>5s}  accuracy from"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['detector']:22s} {r['accuracy']:6.3f} [{r['ci_low']:.3f},{r['ci_high']:.3f}] "
            f"{r['auroc']:6.3f} {r['latency_ms_p50']:9.1f} {r['latency_ms_p95']:9.1f} "
            f"{r['escalated_share']:5.0%} {r['peak_rss_mb']:7.0f} {r['load']:5.1f}  {r['accuracy_source']}"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--detectors", default="lexical,fast,default")
    ap.add_argument("--limit", type=int, default=None, help="live rows: first N questions only")
    ap.add_argument("--latency-sample", type=int, default=20, help="learned rows: live latency questions")
    ap.add_argument("--refresh", action="store_true", help="recompute the named rows")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (1: best on a busy box)"
    )
    ap.add_argument("--_row", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args._row:  # child process: one row
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        result = run_row(args._row, args.data, args.limit, args.latency_sample)
        result["threads"] = args.threads
        ROW_DIR.mkdir(parents=True, exist_ok=True)
        (ROW_DIR / f"{args._row}.json").write_text(json.dumps(result, indent=2) + "\n")
        return

    for row in [r.strip() for r in args.detectors.split(",") if r.strip()]:
        if (ROW_DIR / f"{row}.json").is_file() and not args.refresh:
            continue
        cmd = [sys.executable, __file__, str(args.data), "--_row", row]
        cmd += ["--latency-sample", str(args.latency_sample)]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        print(f"running {row} ...", file=sys.stderr)
        if subprocess.run(cmd, check=False).returncode != 0:
            print(f"row {row} failed (see above); other rows kept", file=sys.stderr)
    rows = [json.loads(p.read_text()) for p in ROW_DIR.glob("*.json")] if ROW_DIR.is_dir() else []
    rows.sort(key=lambda r: (ORDER.index(r["detector"].partition("@")[0]), r["detector"]))
    print(_table(rows))
    (RESULTS / "detectors.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
