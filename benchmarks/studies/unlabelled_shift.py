"""Can an unlabelled query log alone correct the generated questions' shift? Replayed on recorded
scores, no reading; not shipped.

``calibrate`` moves generated in-scope questions' scores up by a fixed shift (``GENERATED_SHIFT``),
because people's questions score higher. A query log, unlabelled, is a mixture of the corpus's
answerable and unanswerable questions. This fits the shift to it: the log's scores are matched
(Cramer-von Mises distance between distribution functions) by a mixture ``pi * in(shift) + (1 - pi)
* out`` of the generated in-scope scores moved by ``shift`` logits and the generated out-of-scope
ones, over a grid of ``shift`` and ``pi``; the threshold is then the budget threshold of the moved
in-scope scores. Judged per set on the people's questions (the log): false refusals, caught, and
caught short of the best threshold in hindsight, beside the fixed shift.

    python benchmarks/studies/unlabelled_shift.py \
        benchmarks/studies/results/calibration_study_answer_first.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import cpu_model

from scopeguard.calibration import GENERATED_SHIFT
from scopeguard.detection.head.calibration import caught_at
from scopeguard.detection.profile import budget_threshold


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.asarray(np.log(p / (1 - p)))


def moved(p: np.ndarray, shift: float) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-(logit(p) + shift))))


def ecdf(sample: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(sample), at, side="right") / len(sample)


def fit_shift(log: np.ndarray, ins: np.ndarray, outs: np.ndarray) -> tuple[float, float]:
    """The ``(shift, pi)`` whose mixture's distribution function is nearest the log's."""
    at = np.sort(log)
    target = ecdf(log, at)
    f_out = ecdf(outs, at)
    best = (np.inf, 0.0, 0.0)
    for shift in np.arange(-1.0, 3.01, 0.05):
        f_in = ecdf(moved(ins, shift), at)
        for pi in np.arange(0.05, 0.951, 0.025):
            d = float(np.mean((pi * f_in + (1 - pi) * f_out - target) ** 2))
            if d < best[0]:
                best = (d, float(shift), float(pi))
    return best[1], best[2]


def judge(p: np.ndarray, y: np.ndarray, t: float) -> tuple[float, float]:
    return float((p[y == 0] >= t).mean()), float((p[y == 1] >= t).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", type=Path)
    ap.add_argument("--rephrased", default="ansp", help="the --extra label of calibrate's rephrasing")
    ap.add_argument("--budget", type=float, default=0.10)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    sets = json.loads(args.study.read_text())["sets"]
    rows: list[dict[str, Any]] = []
    for name, s in sets.items():
        p_h, y_h = np.array(s["p_h"]), np.array(s["y_h"])
        p_g, y_g = np.array(s["p_g"]), np.array(s["y_g"])
        ins = np.array(s["extra"][args.rephrased])
        outs = p_g[y_g == 1]
        best = caught_at(p_h, y_h, args.budget)
        shift, pi = fit_shift(p_h, ins, outs)
        for rule, used in (("fixed", GENERATED_SHIFT), ("fitted to the log", shift)):
            t = budget_threshold(moved(ins, used).tolist(), args.budget)
            fr, caught = judge(p_h, y_h, t)
            rows.append(
                {
                    "set": name,
                    "rule": rule,
                    "shift": used,
                    "in_scope_share_fitted": pi if rule != "fixed" else None,
                    "in_scope_share_true": float((y_h == 0).mean()),
                    "false_refusals": fr,
                    "caught": caught,
                    "short_of_hindsight": best - caught,
                }
            )
    head = f"{'set':<15} {'rule':<18} {'shift':>6} {'pi fit':>6} {'pi':>5} {'FR':>6} {'caught':>6}"
    print(f"{head} {'short':>6}")
    for r in rows:
        pi_fit = "" if r["in_scope_share_fitted"] is None else f"{r['in_scope_share_fitted']:.2f}"
        print(
            f"{r['set']:<15} {r['rule']:<18} {r['shift']:>6.2f} {pi_fit:>6} {r['in_scope_share_true']:>5.2f} "
            f"{r['false_refusals']:>6.3f} {r['caught']:>6.3f} {r['short_of_hindsight']:>6.3f}"
        )
    for rule in ("fixed", "fitted to the log"):
        mine = [r for r in rows if r["rule"] == rule]
        print(
            f"worst, {rule}: false refusals {max(r['false_refusals'] for r in mine):.3f}, "
            f"short {max(r['short_of_hindsight'] for r in mine):.3f}"
        )
    if args.out:
        result = {"machine": cpu_model(), "source": str(args.study), "budget": args.budget, "rows": rows}
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
