"""Threshold rules tried on a calibration study's scores, without reading anything again (#58 item 5).

``calibration_study.py`` records, per set, the left-out head's scores of the human questions
(``p_h``, ``y_h``), of the generated ones (``p_g``, ``y_g``) and of each ``--extra`` rephrasing.
This replays rules on them:

- ``shipped``: what ``calibrate`` does (the rephrased in-scope questions' budget threshold, moved
  up by the shift, ``GENERATED_SHIFT`` or ``--shift``);
- ``cap F``: the same, but no higher than ``F`` of the way from the budget threshold to the median
  generated out-of-scope score (logits): on a corpus whose generated out-of-scope questions sit far
  above its in-scope ones the shift is cut short;
- ``cap LOO``: ``F`` chosen on the other sets (the lowest worst shortfall among those whose worst
  false refusals stay <= 0.15), as a user's corpus would get it;
- ``LOO median`` (``mean``, ``q60``, ``q67``, ``q75``, ``max``): the shift for a set is that statistic of
  the other sets' gaps (the study's ``shifts_logit_extra`` of the rephrasing: how far the human in-scope
  questions' budget threshold sits above the rephrased ones'), as a user's corpus would get it;
  ``GENERATED_SHIFT`` is the median of all six.

    python benchmarks/studies/calibration_rules.py benchmarks/studies/results/calibration_study_12docs.json

Prints false refusals / caught (caught short of the best threshold in hindsight at the same false
refusals) per set and writes ``--out`` (JSON) when given.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import cpu_model

from scopeguard.calibration import GENERATED_SHIFT
from scopeguard.detection.head.calibration import caught_at
from scopeguard.detection.profile import budget_threshold

Rule = Callable[[str], float]  # set name -> threshold on P(out of scope)
MAX_FR = 0.15  # the issue's first condition


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def expit(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", type=Path, help="a calibration_study.py results JSON")
    ap.add_argument("--rephrased", default="para1", help="the --extra label calibrate's rephrasing ran as")
    ap.add_argument("--shift", type=float, default=GENERATED_SHIFT, help="logits (default: calibrate's)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    shift = args.shift
    study = json.loads(args.study.read_text())
    budget, sets = study["budget"], study["sets"]
    names = list(sets)

    def arrays(n: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        s = sets[n]
        return np.array(s["p_h"]), np.array(s["y_h"]), np.array(s["p_g"]), np.array(s["y_g"])

    def measure(rule: Rule, n: str) -> dict[str, float]:
        ph, yh, _, _ = arrays(n)
        t = rule(n)
        fr = float((ph[yh == 0] >= t).mean())
        caught = float((ph[yh == 1] >= t).mean())
        return {"false_refusals": fr, "caught": caught, "short_of_hindsight": caught_at(ph, yh, fr) - caught}

    def base(n: str) -> float:
        return logit(budget_threshold(sets[n]["extra"][args.rephrased], budget))

    def capped(f: float) -> Rule:
        def rule(n: str) -> float:
            _, _, pg, yg = arrays(n)
            oos = float(np.median([logit(p) for p in pg[yg == 1]]))
            return expit(min(base(n) + shift, base(n) + f * (oos - base(n))))

        return rule

    rules: dict[str, Rule] = {"shipped": lambda n: expit(base(n) + shift)}
    grid = [round(0.3 + 0.05 * i, 2) for i in range(13)]
    for f in grid:
        rules[f"cap {f:.2f}"] = capped(f)
    chosen: dict[str, float] = {}
    for n in names:

        def worst(f: float, n: str = n) -> tuple[bool, float, float]:
            ms = [measure(capped(f), m) for m in names if m != n]
            fr = max(m["false_refusals"] for m in ms)
            return fr > MAX_FR, max(m["short_of_hindsight"] for m in ms), fr

        chosen[n] = min(grid, key=worst)
    rules["cap LOO"] = lambda n: capped(chosen[n])(n)
    gaps: dict[str, float] = study["shifts_logit_extra"][args.rephrased]
    statistics: dict[str, Callable[[list[float]], float]] = {
        "median": lambda g: float(np.median(g)),
        "mean": lambda g: float(np.mean(g)),
        **{f"q{round(100 * q)}": (lambda g, q=q: float(np.quantile(g, q))) for q in (0.6, 2 / 3, 0.75)},
        "max": lambda g: float(np.max(g)),
    }
    for label, stat in statistics.items():

        def learned(n: str, stat: Callable[[list[float]], float] = stat) -> float:
            return expit(base(n) + stat([gaps[m] for m in names if m != n]))

        rules[f"LOO {label}"] = learned

    rows = {label: {n: measure(rule, n) for n in names} for label, rule in rules.items()}
    cell = "{false_refusals:.2f}/{caught:.2f} ({short_of_hindsight:+.2f})"
    print(f"budget {budget}; CPU-free replay of {args.study.name}; LOO fractions {chosen}")
    print(f"{'rule':<10}", *(f"{n[:16]:>20}" for n in names), f"{'worst FR':>9} {'worst short':>11}")
    for label, row in rows.items():
        worst_fr = max(m["false_refusals"] for m in row.values())
        worst_short = max(m["short_of_hindsight"] for m in row.values())
        print(
            f"{label:<10}",
            *(f"{cell.format(**row[n]):>20}" for n in names),
            f"{worst_fr:9.2f} {worst_short:11.2f}",
        )
    if args.out:
        out: dict[str, Any] = {"study": str(args.study), "machine": cpu_model(), "budget": budget}
        out |= {"rephrased": args.rephrased, "shift": shift}
        out |= {"loo_fraction": chosen, "rows": rows}
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
