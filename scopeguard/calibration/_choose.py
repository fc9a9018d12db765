"""The operating point for a false-refusal budget, and what it does on the calibration questions.

The threshold is :func:`~scopeguard.detection.profile.budget_threshold` of the in-scope scores for
the budget; the hedge band starts at the threshold for the hedge budget (never above the
threshold). Rates are counted on the calibration questions, with exact 95% intervals
(:func:`~scopeguard.detection.profile.rate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scopeguard.detection.head.calibration import rescale_probability
from scopeguard.detection.profile import Rate, budget_threshold, rate
from scopeguard.errors import ConfigurationError

__all__ = [
    "GENERATED_SHIFT",
    "GENERATED_SHIFT_SET",
    "BudgetRow",
    "OperatingPoint",
    "budget_rows",
    "learned_shift",
    "needed_in_scope",
    "operating_point",
    "shifted",
]

#: logits added to a generated in-scope question's score before the threshold is chosen. Generated
#: in-scope questions are easier than people's: written from one sentence in its words, and kept when
#: the reading model already finds them answerable. calibrate first rephrases them in a reader's
#: words (:mod:`scopeguard.calibration._rephrase`), which closes part of the gap; this is the median,
#: over six corpora of people's questions (news, Wikipedia, reviews, policy pages and two sets of
#: hand-written paragraphs), of how far the people's answerable questions still score above the
#: rephrased ones at the budget's quantile. With it, false refusals at a 0.10 budget stayed at or
#: under 0.16 on all six (docs/research/calibration.md).
GENERATED_SHIFT = 0.58

#: the same for the default detector reading sets (``read="set"``): how far people's in-scope
#: questions, each read against its retriever's top 3 joined, score above the rephrased generated
#: ones read against their own document, by the set head; the largest gap of three corpora (news,
#: Wikipedia, policy pages; benchmarks/studies/set_shift.py). The set head's scores lie closer
#: together than the passage head's: moved by the passage reads' shift, its threshold would pass
#: most out-of-scope questions.
GENERATED_SHIFT_SET = 0.25


def learned_shift(read: str | None) -> float:
    """The shift learned for a detector's read mode: ``"set"``, or passage by passage (any other)."""
    return GENERATED_SHIFT_SET if read == "set" else GENERATED_SHIFT


def shifted(score: float, shift: float) -> float:
    """``score`` (a probability) moved by ``shift`` logits."""
    return score if shift == 0.0 else float(rescale_probability(score, 1.0, shift))


@dataclass(frozen=True)
class OperatingPoint:
    """A threshold (a score at or above it is out of scope), the start of the hedge band (``None``:
    no band), and on the calibration questions: answerable ones refused, out-of-scope ones caught
    and answerable ones hedged."""

    threshold: float
    hedge_from: float | None
    false_refusals: Rate
    caught: Rate
    hedged: Rate | None


@dataclass(frozen=True)
class BudgetRow:
    """One line of the report card's table: the point for ``budget``, or ``None`` with ``needed``
    in-scope questions when there are too few."""

    budget: float
    point: OperatingPoint | None
    needed: int


def needed_in_scope(budget: float) -> int:
    """The fewest in-scope questions :func:`budget_threshold` takes for ``budget`` (its rank rule)."""
    n = 1
    while math.ceil((n + 1) * (1.0 - budget)) > n:
        n += 1
    return n


def operating_point(
    in_scope: Sequence[float], out_of_scope: Sequence[float], budget: float, hedge_budget: float | None = None
) -> OperatingPoint:
    """The point for ``budget`` (and the hedge band for ``hedge_budget``) on these scores; a
    :class:`ConfigurationError` when there are too few in-scope scores for the budget."""
    threshold = budget_threshold(in_scope, budget)
    hedge_from = None
    if hedge_budget is not None:
        hedge_from = min(budget_threshold(in_scope, hedge_budget), threshold)
    refused = sum(s >= threshold for s in in_scope)
    caught = sum(s >= threshold for s in out_of_scope)
    hedged = (
        None
        if hedge_from is None
        else rate(sum(hedge_from <= s < threshold for s in in_scope), len(in_scope))
    )
    return OperatingPoint(
        threshold=threshold,
        hedge_from=hedge_from,
        false_refusals=rate(refused, len(in_scope)),
        caught=rate(caught, len(out_of_scope)),
        hedged=hedged,
    )


def budget_rows(
    in_scope: Sequence[float], out_of_scope: Sequence[float], budgets: Sequence[float]
) -> list[BudgetRow]:
    """The point at each of ``budgets`` (none where the questions are too few)."""
    rows = []
    for budget in budgets:
        try:
            point: OperatingPoint | None = operating_point(in_scope, out_of_scope, budget)
        except ConfigurationError:
            point = None
        rows.append(BudgetRow(budget=budget, point=point, needed=needed_in_scope(budget)))
    return rows
