"""Calibration pieces on scripted scores: logistic fit, thresholds, operating points, grouped OOF."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scopeguard.detection.head.calibration import (
    LogisticHead,
    auroc,
    caught_at,
    choose_threshold,
    fit_logistic,
    grouped_oof,
    operating_point,
    platt,
    rescaled,
)
from scopeguard.errors import ConfigurationError, ModelError


def test_fit_logistic_recovers_a_separating_direction() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2))
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(int)
    head = fit_logistic(x, y, ("a", "b"))
    assert head.coef[0] > 0 > head.coef[1]
    acc = float(((head.predict(x) >= 0.5) == (y == 1)).mean())
    assert acc > 0.9
    again = LogisticHead.from_dict(head.to_dict())
    assert np.allclose(again.predict(x), head.predict(x))
    assert head.predict_one({"a": 3.0, "b": 0.0}) > 0.9


def test_fit_logistic_weights_shift_the_decision() -> None:
    x = np.array([[0.0], [0.0], [1.0], [1.0]])
    y = np.array([0, 1, 0, 1])
    plain = fit_logistic(x, y, ("a",)).predict([[0.0]])[0]
    heavy = fit_logistic(x, y, ("a",), weights=np.array([1.0, 9.0, 1.0, 9.0])).predict([[0.0]])[0]
    assert math.isclose(plain, 0.5, abs_tol=1e-6) and heavy > 0.8


def test_fit_logistic_rejects_bad_input() -> None:
    with pytest.raises(ConfigurationError, match="both labels"):
        fit_logistic(np.zeros((3, 1)), np.zeros(3), ("a",))
    with pytest.raises(ConfigurationError, match="NaN"):
        fit_logistic(np.array([[np.nan], [1.0]]), np.array([0, 1]), ("a",))
    with pytest.raises(ModelError):
        LogisticHead.from_dict({"features": ["a"]})


def test_choose_threshold_and_operating_point() -> None:
    p = np.array([0.1, 0.2, 0.35, 0.4, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    t = choose_threshold(p, y)
    assert 0.35 < t <= 0.4
    op = operating_point(p, y, t)
    assert op.accuracy == 1.0 and op.false_refusal_rate == 0.0 and op.oos_recall == 1.0 and op.n == 6
    op5 = operating_point(p, y, 0.5)
    assert op5.accuracy == pytest.approx(5 / 6) and op5.oos_recall == pytest.approx(2 / 3)


def test_auroc_with_ties_and_one_class() -> None:
    assert auroc([0.1, 0.9], [0, 1]) == 1.0
    assert auroc([0.5, 0.5], [0, 1]) == 0.5
    assert math.isnan(auroc([0.2, 0.3], [1, 1]))


def test_grouped_oof_never_predicts_a_document_it_trained_on() -> None:
    groups = [f"d{i // 3}" for i in range(30)]
    seen: list[tuple[set[str], set[str]]] = []

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        seen.append(({groups[i] for i in train}, {groups[i] for i in test}))
        return np.full(len(test), 0.5)

    out = grouped_oof(30, groups, fit_predict, folds=5)
    assert not np.isnan(out).any() and len(seen) == 5
    assert all(not (tr & te) for tr, te in seen)


def test_leave_one_dataset_out_never_fits_on_the_scored_dataset() -> None:
    from scopeguard.detection.head.calibration import dataset_oof

    datasets = ["a", "a", "b", "c", "c", "c"]
    seen: list[tuple[list[int], list[int]]] = []

    def fp(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        seen.append((train.tolist(), test.tolist()))
        assert not {datasets[i] for i in train} & {datasets[i] for i in test}
        return np.full(len(test), float(len(train)))

    out = dataset_oof(datasets, fp)
    assert out.tolist() == [4.0, 4.0, 5.0, 3.0, 3.0, 3.0]
    assert sorted(t for _, ts in seen for t in ts) == list(range(6))
    with pytest.raises(ConfigurationError, match="at least 2 datasets"):
        dataset_oof(["a", "a"], fp)


def test_platt_makes_a_timid_head_say_what_it_means_and_keeps_its_ranking() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 4000)
    x = np.where(y == 1, 0.5, -0.5) + rng.normal(0, 1.0, len(y))  # the true log-odds are exactly x
    timid = 1.0 / (1.0 + np.exp(-x / 4.0))  # squashed towards 0.5, as an L2-held head is
    a, b = platt(timid, y)
    assert 3.5 < a < 4.5 and abs(b) < 0.2
    head = LogisticHead(features=("x",), mean=(0.0,), scale=(1.0,), coef=(0.25,), intercept=0.0)
    fixed = rescaled(head, a, b)
    assert np.allclose(head.predict(x[:, None]), timid)
    p = fixed.predict(x[:, None])
    assert np.array_equal(np.argsort(p, kind="stable"), np.argsort(timid, kind="stable"))
    for lo, hi in (
        (0.05, 0.2),
        (0.8, 0.95),
    ):  # calibrated: in each band the share out of scope is near its mean
        m = (p >= lo) & (p < hi)
        assert abs(float(y[m].mean()) - float(p[m].mean())) < 0.05
    with pytest.raises(ModelError, match="slope must be positive"):
        rescaled(head, -1.0, 0.0)


def test_caught_at_is_the_recall_of_the_best_threshold_within_the_false_refusal_budget() -> None:
    p = np.array([0.1, 0.2, 0.3, 0.9, 0.4, 0.6, 0.8, 0.95, 0.35, 0.25])
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    # 4 in-scope: 10% allows none refused, so the cut sits at the top in-scope score 0.9
    assert caught_at(p, y, 0.10) == pytest.approx(1 / 6)
    # 25% allows one (0.9): the cut is the next in-scope score 0.3
    assert caught_at(p, y, 0.25) == pytest.approx(5 / 6)
    assert math.isnan(caught_at(p[:4], y[:4], 0.10))
