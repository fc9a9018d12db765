"""Ranking metrics for a single relevant document per question, with bootstrap intervals.

Conventions (each question has exactly one relevant document: the one it was written from):

- ``rank`` is the 1-based position of the relevant document in the ranking, or ``None`` when it
  is not among the retrieved documents (beyond the search depth, not returned, or not in the corpus).
- Ties: rankings order equal scores by document order (the order documents were indexed); see
  :func:`order_by_score`. Every retriever here does the same, so results are deterministic.
- ``recall@k`` = 1 if rank <= k. A ``k`` larger than the corpus is allowed: it equals recall at
  the corpus size. ``mrr`` = 1/rank (0 when not retrieved), i.e. MRR@depth of the search.
  ``ndcg@k`` = 1/log2(rank + 1) if rank <= k (the ideal DCG of one relevant document is 1).
- A question whose document is missing from the corpus counts as a miss (rank ``None``) and is
  reported in ``n_missing``.
- Intervals: percentile bootstrap over questions (``n_bootstrap`` resamples, fixed seed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scopeguard.errors import InputError

__all__ = [
    "PRIMARY_METRIC",
    "Estimate",
    "GroupMetrics",
    "aggregate",
    "metric_names",
    "order_by_score",
    "question_metrics",
    "rank_of",
    "recall_curve",
]

PRIMARY_METRIC = "recall@1"


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    out = tuple(ks)
    if not out or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in out):
        raise InputError(f"k values must be positive integers, got {list(ks)!r}")
    return out


def order_by_score(doc_ids: Sequence[str], scores: Sequence[float]) -> list[str]:
    """``doc_ids`` sorted by score descending; equal scores keep their given (document) order."""
    if len(doc_ids) != len(scores):
        raise InputError(f"{len(doc_ids)} document ids but {len(scores)} scores")
    order = sorted(range(len(doc_ids)), key=lambda i: (-float(scores[i]), i))
    return [doc_ids[i] for i in order]


def rank_of(relevant_id: str, ranked_ids: Sequence[str]) -> int | None:
    """1-based rank of ``relevant_id`` in ``ranked_ids`` (first occurrence), ``None`` if absent."""
    for position, doc_id in enumerate(ranked_ids, 1):
        if doc_id == relevant_id:
            return position
    return None


def metric_names(ks: Sequence[int], ndcg_k: int = 10) -> list[str]:
    return [*(f"recall@{k}" for k in _check_ks(ks)), "mrr", f"ndcg@{ndcg_k}"]


def question_metrics(rank: int | None, ks: Sequence[int], ndcg_k: int = 10) -> dict[str, float]:
    """Per-question values of every metric for the relevant document's ``rank``."""
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise InputError(f"rank must be a positive integer or None, got {rank!r}")
    out = {f"recall@{k}": float(rank is not None and rank <= k) for k in _check_ks(ks)}
    out["mrr"] = 0.0 if rank is None else 1.0 / rank
    out[f"ndcg@{ndcg_k}"] = 1.0 / math.log2(rank + 1) if rank is not None and rank <= ndcg_k else 0.0
    return out


@dataclass(frozen=True)
class Estimate:
    """A metric's mean over questions and its bootstrap confidence interval."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class GroupMetrics:
    """Metrics over one group of questions (all, in-scope, a topic...)."""

    n: int
    n_missing: int
    metrics: dict[str, Estimate] = field(default_factory=dict)
    confidence: float = 0.95

    def values(self) -> dict[str, float]:
        """``{metric: mean}``; the primary metric is :data:`PRIMARY_METRIC`."""
        return {name: e.value for name, e in self.metrics.items()}


def aggregate(
    ranks: Sequence[int | None],
    ks: Sequence[int] = (1, 5, 10),
    *,
    missing: Sequence[bool] | None = None,
    ndcg_k: int = 10,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> GroupMetrics:
    """Mean metrics over questions with percentile-bootstrap intervals.

    ``missing`` flags questions whose document is not in the corpus (their rank must be ``None``).
    """
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be in (0, 1), got {confidence}")
    if n_bootstrap < 0:
        raise InputError(f"n_bootstrap must be >= 0, got {n_bootstrap}")
    flags = list(missing) if missing is not None else [False] * len(ranks)
    if len(flags) != len(ranks):
        raise InputError(f"{len(ranks)} ranks but {len(flags)} missing flags")
    names = metric_names(ks, ndcg_k)
    n = len(ranks)
    if n == 0:
        nan = Estimate(math.nan, math.nan, math.nan)
        return GroupMetrics(0, 0, {m: nan for m in names}, confidence)
    table = np.array([[question_metrics(r, ks, ndcg_k)[m] for m in names] for r in ranks], dtype=np.float64)
    means = table.mean(axis=0)
    if n_bootstrap > 0 and n > 1:
        rng = np.random.default_rng(seed)
        boot = np.empty((n_bootstrap, len(names)))
        for start in range(0, n_bootstrap, 256):  # bounded memory on large studies
            stop = min(start + 256, n_bootstrap)
            idx = rng.integers(0, n, size=(stop - start, n))
            boot[start:stop] = table[idx].mean(axis=1)
        alpha = (1.0 - confidence) / 2.0
        low, high = np.quantile(boot, alpha, axis=0), np.quantile(boot, 1.0 - alpha, axis=0)
    else:
        low, high = means, means
    metrics = {m: Estimate(float(means[j]), float(low[j]), float(high[j])) for j, m in enumerate(names)}
    n_missing = sum(bool(f) for f in flags)
    return GroupMetrics(n=n, n_missing=n_missing, metrics=metrics, confidence=confidence)


def recall_curve(ranks: Sequence[int | None], max_k: int) -> list[float]:
    """Recall@k for k = 1..max_k (the points of a Recall@k plot)."""
    if max_k < 1:
        raise InputError(f"max_k must be >= 1, got {max_k}")
    if not ranks:
        return [math.nan] * max_k
    arr = np.array([r if r is not None else np.iinfo(np.int64).max for r in ranks], dtype=np.int64)
    return [float(np.mean(arr <= k)) for k in range(1, max_k + 1)]
