"""Metrics against hand-computed rankings: ties, missing documents, k larger than the corpus."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scopeguard.errors import InputError
from scopeguard.retrieval._ranking import hits_from_scores, top_k
from scopeguard.retrieval.metrics import (
    aggregate,
    order_by_score,
    question_metrics,
    rank_of,
    recall_curve,
)
from scopeguard.types import Document


def test_order_by_score_breaks_ties_in_document_order() -> None:
    ids = ["a", "b", "c", "d", "e"]
    scores = [0.5, 0.9, 0.5, 0.9, 0.1]
    # 0.9 ties: b before d (document order); 0.5 ties: a before c
    assert order_by_score(ids, scores) == ["b", "d", "a", "c", "e"]
    assert rank_of("c", order_by_score(ids, scores)) == 4


def test_top_k_keeps_document_order_for_ties_at_the_cut() -> None:
    # the 2nd and 3rd best tie at 0.7: with k=2 the earlier document (index 1) must win
    scores = [0.2, 0.7, 0.9, 0.7, 0.1]
    assert top_k(scores, 2).tolist() == [2, 1]
    assert top_k(scores, 3).tolist() == [2, 1, 3]
    # k larger than the corpus returns everything, best first
    assert top_k(scores, 50).tolist() == [2, 1, 3, 0, 4]
    with pytest.raises(InputError, match="positive integer"):
        top_k(scores, 0)


def test_hits_from_scores_are_1_based_and_carry_documents() -> None:
    docs = [Document(id=f"d{i}", text=f"text {i}") for i in range(3)]
    hits = hits_from_scores(docs, [0.1, 0.3, 0.3], k=5)
    assert [(h.document.id, h.rank, h.score) for h in hits] == [
        ("d1", 1, 0.3),
        ("d2", 2, 0.3),
        ("d0", 3, 0.1),
    ]


def test_rank_of_missing_document_is_none() -> None:
    assert rank_of("z", ["a", "b"]) is None
    assert rank_of("a", []) is None


def test_question_metrics_by_hand() -> None:
    m = question_metrics(3, ks=(1, 5, 10))
    assert m["recall@1"] == 0.0
    assert m["recall@5"] == 1.0 and m["recall@10"] == 1.0
    assert m["mrr"] == pytest.approx(1 / 3)
    assert m["ndcg@10"] == pytest.approx(1 / math.log2(4))  # = 0.5
    first = question_metrics(1, ks=(1,))
    assert first == {"recall@1": 1.0, "mrr": 1.0, "ndcg@10": 1.0}
    far = question_metrics(12, ks=(10,))
    assert far["recall@10"] == 0.0 and far["ndcg@10"] == 0.0 and far["mrr"] == pytest.approx(1 / 12)
    miss = question_metrics(None, ks=(1, 5))
    assert miss == {"recall@1": 0.0, "recall@5": 0.0, "mrr": 0.0, "ndcg@10": 0.0}
    with pytest.raises(InputError):
        question_metrics(0, ks=(1,))
    with pytest.raises(InputError):
        question_metrics(1, ks=(0,))


def test_aggregate_means_missing_and_k_beyond_corpus() -> None:
    # 4 questions over a 3-document corpus: ranks 1, 2, 3 and one whose document is missing
    ranks = [1, 2, 3, None]
    g = aggregate(ranks, ks=(1, 2, 10), missing=[False, False, False, True], n_bootstrap=0)
    v = g.values()
    assert g.n == 4 and g.n_missing == 1
    assert v["recall@1"] == pytest.approx(1 / 4)
    assert v["recall@2"] == pytest.approx(2 / 4)
    # k=10 > corpus size 3: every present document is found; the missing one stays a miss
    assert v["recall@10"] == pytest.approx(3 / 4)
    assert v["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 0) / 4)
    assert v["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3) + 1 / math.log2(4)) / 4)
    # without bootstrap the interval collapses onto the mean
    e = g.metrics["mrr"]
    assert e.low == e.high == e.value


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    ranks: list[int | None] = [int(r) if r < 8 else None for r in rng.integers(1, 10, size=60)]
    a = aggregate(ranks, n_bootstrap=500, seed=3)
    b = aggregate(ranks, n_bootstrap=500, seed=3)
    assert a == b
    for e in a.metrics.values():
        assert e.low <= e.value <= e.high
    r1 = a.metrics["recall@1"]
    assert r1.high - r1.low > 0.05  # 60 questions: a real interval, not a point
    assert r1.low >= 0.0 and r1.high <= 1.0


def test_empty_group_is_nan_not_zero() -> None:
    g = aggregate([], n_bootstrap=10)
    assert g.n == 0 and math.isnan(g.values()["recall@1"])


def test_recall_curve() -> None:
    assert recall_curve([1, 3, None, 2], 4) == [0.25, 0.5, 0.75, 0.75]
