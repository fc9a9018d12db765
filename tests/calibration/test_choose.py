"""The operating point: the threshold meets the budget on the scores it was chosen on, the hedge
band sits below it, the rates count the questions, and the number of questions each budget needs."""

from __future__ import annotations

import random

import pytest

from scopeguard.calibration._choose import budget_rows, needed_in_scope, operating_point
from scopeguard.calibration._plot import tradeoff
from scopeguard.detection.profile import budget_threshold
from scopeguard.errors import ConfigurationError


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("budget", [0.05, 0.1, 0.15, 0.2, 0.5])
def test_the_threshold_meets_the_budget(seed: int, budget: float) -> None:
    rng = random.Random(seed)
    in_scope = [rng.betavariate(2, 5) for _ in range(rng.randint(20, 120))]
    out_of_scope = [rng.betavariate(5, 2) for _ in range(rng.randint(10, 80))]
    hedge = min(2 * budget, 0.5) if budget < 0.5 else None
    point = operating_point(in_scope, out_of_scope, budget, hedge)
    refused = [s for s in in_scope if s >= point.threshold]
    assert len(refused) / len(in_scope) <= budget
    assert point.false_refusals.k == len(refused) and point.false_refusals.n == len(in_scope)
    assert point.caught.k == sum(s >= point.threshold for s in out_of_scope)
    # split-conformal: a new answerable question is refused with probability (k + 1) / (n + 1) at
    # most the budget, and the threshold is as low as that allows (one more refused would exceed it)
    n = len(in_scope)
    assert (len(refused) + 1) / (n + 1) <= budget < (len(refused) + 2) / (n + 1)
    if hedge is not None:
        assert point.hedge_from is not None and point.hedge_from <= point.threshold
        hedged = sum(point.hedge_from <= s < point.threshold for s in in_scope)
        assert point.hedged is not None and point.hedged.k == hedged
        assert (len(refused) + hedged) / len(in_scope) <= hedge
    else:
        assert point.hedge_from is None and point.hedged is None


@pytest.mark.parametrize("budget", [0.05, 0.1, 0.15, 0.2, 0.3, 0.5])
def test_needed_in_scope_is_what_budget_threshold_takes(budget: float) -> None:
    n = needed_in_scope(budget)
    budget_threshold([0.1] * n, budget)
    with pytest.raises(ConfigurationError, match=f"needs at least {n} in-scope questions"):
        budget_threshold([0.1] * (n - 1), budget)


def test_budget_rows_mark_the_budgets_with_too_few_questions() -> None:
    in_scope = [i / 12 for i in range(12)]
    rows = budget_rows(in_scope, [0.9, 0.95], (0.05, 0.1, 0.2))
    assert [r.point is None for r in rows] == [True, False, False]
    assert rows[0].needed == 19
    assert rows[1].point is not None and rows[2].point is not None
    assert rows[2].point.threshold <= rows[1].point.threshold  # a larger budget refuses more


def test_tradeoff_runs_from_refusing_everything_to_nothing() -> None:
    points = tradeoff([0.1, 0.2, 0.6], [0.5, 0.9])
    assert points[0] == (1.0, 1.0) and points[-1] == (0.0, 0.0)
    assert (pytest.approx(1 / 3), 1.0) in points
