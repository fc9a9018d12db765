"""detection_metrics, auroc, bootstrap_ci and latency percentiles against hand-computed values."""

from __future__ import annotations

import math

import pytest

from scopeguard.errors import InputError
from scopeguard.evaluation.detection import (
    METRIC_NAMES,
    PRIMARY_METRIC,
    auroc,
    bootstrap_ci,
    correctness,
    detection_metrics,
    latency_percentiles,
    recall_at_false_refusals,
)
from scopeguard.types import Verdict

OOS, INS = "out_of_scope", "in_scope"


def _verdicts() -> tuple[list[str], list[Verdict]]:
    y = [OOS, OOS, INS, INS, OOS]
    v = [
        Verdict(label=OOS, score=0.9, latency_ms=10, escalated=True, llm_calls=2),
        Verdict(label=INS, score=0.4, latency_ms=20),
        Verdict(label=OOS, score=0.4, latency_ms=30),
        Verdict(label=INS, score=0.1, latency_ms=40),
        Verdict(label="unknown", score=None, latency_ms=50, llm_calls=3),
    ]
    return y, v


def test_metrics_match_hand_computation() -> None:
    y, v = _verdicts()
    m = detection_metrics(y, v)
    assert set(METRIC_NAMES) == set(m)
    assert PRIMARY_METRIC in m
    assert m["n"] == 5
    # correct: #0 (oos/oos) and #3 (in/in); the unknown counts as wrong
    assert m["accuracy"] == pytest.approx(2 / 5)
    # tp=1 (#0), fp=1 (#2), fn=2 (#1 and the unknown #4)
    assert m["precision_oos"] == pytest.approx(0.5)
    assert m["recall_oos"] == pytest.approx(1 / 3)
    assert m["f1_oos"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert m["false_refusal_rate"] == pytest.approx(1 / 2)  # #2 of the two in-scope questions
    # scored pairs (pos 0.9, 0.4 vs neg 0.4, 0.1): 0.9>0.4, 0.9>0.1, 0.4=0.4 (half), 0.4>0.1 -> 3.5/4
    assert m["auroc"] == pytest.approx(0.875)
    assert m["unknown_rate"] == pytest.approx(0.2)
    assert m["latency_ms_p50"] == pytest.approx(30.0)
    assert m["latency_ms_p95"] == pytest.approx(48.0)  # 40 + 0.8 * (50 - 40)
    assert m["escalated_share"] == pytest.approx(0.2)
    assert m["llm_calls_mean"] == pytest.approx(1.0)
    # at most floor(10% of 2) = 0 in-scope refusals: refuse above 0.4, catching #0 of the three
    assert m["recall_oos_at_fr10"] == pytest.approx(1 / 3)
    assert m["hedged_share"] == 0.0


def test_auroc_all_ties_is_one_half_and_perfect_is_one() -> None:
    assert auroc([OOS, INS, OOS, INS], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.5)
    assert auroc([OOS, INS, OOS, INS], [0.9, 0.2, 0.8, 0.3]) == pytest.approx(1.0)
    assert auroc([OOS, INS], [0.1, 0.9]) == pytest.approx(0.0)


def test_auroc_is_nan_with_one_class() -> None:
    assert math.isnan(auroc([OOS, OOS], [0.2, 0.7]))
    m = detection_metrics([INS, INS], [Verdict(label=INS, score=0.1), Verdict(label=OOS, score=0.8)])
    assert math.isnan(m["auroc"])
    assert m["precision_oos"] == 0.0 and m["recall_oos"] == 0.0 and m["f1_oos"] == 0.0


def test_bad_input_is_rejected_with_a_clear_error() -> None:
    y, v = _verdicts()
    with pytest.raises(InputError, match="5 labels but 4 verdicts"):
        detection_metrics(y, v[:4])
    with pytest.raises(InputError, match="'maybe'"):
        detection_metrics([*y[:4], "maybe"], v)
    with pytest.raises(InputError, match="no verdicts"):
        detection_metrics([], [])
    with pytest.raises(InputError, match="not a Verdict"):
        detection_metrics([OOS], ["out_of_scope"])  # type: ignore[list-item]


def test_bootstrap_ci_is_seeded_and_brackets_the_mean() -> None:
    values = correctness(*_verdicts())
    lo, hi = bootstrap_ci(values, n_resamples=500, seed=1)
    assert (lo, hi) == bootstrap_ci(values, n_resamples=500, seed=1)
    assert 0.0 <= lo <= 0.4 <= hi <= 1.0
    assert lo < hi
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    with pytest.raises(InputError):
        bootstrap_ci([])
    with pytest.raises(InputError):
        bootstrap_ci([1.0], confidence=1.5)


def test_latency_percentiles() -> None:
    got = latency_percentiles([5.0, 1.0, 3.0])
    assert got == {"latency_ms_p50": 3.0, "latency_ms_p95": pytest.approx(4.8)}
    assert math.isnan(latency_percentiles([])["latency_ms_p50"])


def test_recall_at_false_refusals_picks_the_threshold_in_hindsight() -> None:
    y = [INS] * 10 + [OOS] * 4
    scores: list[float | None] = [i / 10 for i in range(10)] + [0.95, 0.85, 0.5, None]
    # 10%: one in-scope question (0.9) may be refused, so refuse above 0.8: 0.95 and 0.85 caught
    assert recall_at_false_refusals(y, scores) == pytest.approx(0.5)
    assert recall_at_false_refusals(y, scores, 0.0) == pytest.approx(0.25)  # above 0.9 only
    assert recall_at_false_refusals(y, scores, 0.5) == pytest.approx(0.75)  # above 0.4; None is missed
    # ties with the first in-scope score it may not refuse stay answered
    assert recall_at_false_refusals([INS] * 10 + [OOS, OOS], [0.5] * 11 + [0.6]) == pytest.approx(0.5)
    # in-scope questions without a score count, and are never refused: refusing the one scored
    # in-scope question is 1 of 10, within 10%
    y, scores = [INS] * 10 + [OOS], [None] * 9 + [0.7, 0.6]
    assert recall_at_false_refusals(y, scores) == 1.0
    assert recall_at_false_refusals(y, scores, 0.05) == 0.0
    assert math.isnan(recall_at_false_refusals([INS, INS], [0.1, 0.2]))
    assert math.isnan(recall_at_false_refusals([INS, OOS], [None, None]))
    with pytest.raises(InputError):
        recall_at_false_refusals([INS, OOS], [0.1])
    with pytest.raises(InputError):
        recall_at_false_refusals([INS, OOS], [0.1, 0.2], 1.0)


def test_hedged_share_counts_the_hedge_band() -> None:
    hedged = Verdict(label=INS, score=0.45, hedge=True)
    m = detection_metrics([INS, INS, OOS, OOS], [hedged, Verdict(label=INS, score=0.1), hedged, hedged])
    assert m["hedged_share"] == pytest.approx(0.75)
