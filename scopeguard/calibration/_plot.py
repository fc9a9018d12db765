"""The report card's plot (matplotlib, Agg backend; needs ``scopeguard[plots]``): the score
histograms of in-scope and out-of-scope questions with the thresholds, and the trade-off between
false refusals and out-of-scope questions caught, with the chosen point."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopeguard._optional import require
from scopeguard.detection.profile import CalibrationProfile

__all__ = ["plot_calibration", "tradeoff"]


def _pyplot() -> Any:
    matplotlib = require("matplotlib", extra="plots", feature="the calibration plot")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def tradeoff(in_scope: Sequence[float], out_of_scope: Sequence[float]) -> list[tuple[float, float]]:
    """``(false refusals, caught)`` at every threshold the scores allow, from refusing everything
    to refusing nothing."""
    cuts = sorted({0.0, *in_scope, *out_of_scope, 1.0 + 1e-9})
    n_in, n_out = max(1, len(in_scope)), max(1, len(out_of_scope))
    return [(sum(s >= t for s in in_scope) / n_in, sum(s >= t for s in out_of_scope) / n_out) for t in cuts]


def plot_calibration(
    profile: CalibrationProfile,
    in_scope: Sequence[float],
    out_of_scope: Sequence[float],
    path: str | os.PathLike[str],
) -> Path:
    """Write the two panels to ``path`` (see the module docstring)."""
    plt = _pyplot()
    fig, (hist, curve) = plt.subplots(1, 2, figsize=(11, 4.2))
    bins = [i / 20 for i in range(21)]
    hist.hist(in_scope, bins=bins, alpha=0.6, label=f"in scope (n={len(in_scope)})", color="tab:blue")
    hist.hist(
        out_of_scope, bins=bins, alpha=0.6, label=f"out of scope (n={len(out_of_scope)})", color="tab:red"
    )
    hist.axvline(profile.threshold, color="black", label=f"threshold {profile.threshold:.3f}")
    if profile.hedge_from is not None:
        hist.axvline(
            profile.hedge_from, color="black", linestyle="--", label=f"hedge from {profile.hedge_from:.3f}"
        )
    hist.set_xlabel("score: P(out of scope)")
    hist.set_ylabel("questions")
    hist.set_title("Scores of the calibration questions")
    hist.legend(fontsize="small")
    points = tradeoff(in_scope, out_of_scope)
    curve.plot([p[0] for p in points], [p[1] for p in points], color="tab:gray")
    chosen = (profile.false_refusals.value or 0.0, profile.caught.value or 0.0)
    curve.plot(*chosen, "o", color="black", label=f"chosen: {chosen[0]:.2f} refused, {chosen[1]:.2f} caught")
    curve.axvline(profile.budget, color="tab:blue", linestyle=":", label=f"budget {profile.budget:g}")
    curve.set_xlim(0, 1)
    curve.set_ylim(0, 1.02)
    curve.set_xlabel("false refusals (answerable questions refused)")
    curve.set_ylabel("out-of-scope questions caught")
    curve.set_title("False refusals vs caught")
    curve.legend(fontsize="small", loc="lower right")
    fig.suptitle(f"{profile.detector}: calibration for a false-refusal budget of {profile.budget:g}")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
