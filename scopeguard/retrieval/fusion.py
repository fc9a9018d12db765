"""Reciprocal-rank fusion of retrievers (registered as ``hybrid`` in :mod:`scopeguard.retrieval.registry`).

:class:`HybridRetriever` runs two :class:`~scopeguard.retrieval.base.Retriever` (for example
BM25 and a dense SBERT index) to depth ``depth`` each and fuses their rankings with
reciprocal-rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009)::

    score(d) = sum_r  weight_r / (rrf_k + rank_r(d))

Documents are identified by ``Document.id`` (their content hash when the id is empty).
"""

from __future__ import annotations

from collections.abc import Sequence

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.retrieval.base import Hit, Retriever
from scopeguard.types import Document

__all__ = ["HybridRetriever", "rrf_fuse"]


def _key(doc: Document) -> str:
    return doc.id or doc.content_hash


def rrf_fuse(
    rankings: Sequence[Sequence[Hit]], *, k: int, rrf_k: float = 60.0, weights: Sequence[float] | None = None
) -> list[Hit]:
    """Fuse ranked hit lists by reciprocal rank; ties keep first-seen order. Returns ``k`` hits."""
    if rrf_k <= 0:
        raise ConfigurationError(f"rrf_k must be > 0, got {rrf_k}")
    w = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(w) != len(rankings):
        raise ConfigurationError(f"{len(w)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    docs: dict[str, Document] = {}
    for weight, hits in zip(w, rankings, strict=True):
        for hit in hits:
            key = _key(hit.document)
            docs.setdefault(key, hit.document)
            scores[key] = scores.get(key, 0.0) + weight / (rrf_k + hit.rank)
    order = sorted(scores, key=lambda key: -scores[key])  # stable: first-seen wins ties
    return [Hit(document=docs[key], score=scores[key], rank=i) for i, key in enumerate(order[:k], 1)]


class HybridRetriever:
    """Reciprocal-rank fusion of two retrievers (implements the ``Retriever`` protocol).

    Args:
        first, second: the retrievers to fuse (each is indexed on the same documents).
        depth: how many hits to take from each before fusing (at least ``k``).
        rrf_k: the RRF constant (60 in the original paper).
        weights: per-retriever weights (default equal).
    """

    def __init__(
        self,
        first: Retriever,
        second: Retriever,
        *,
        depth: int = 100,
        rrf_k: float = 60.0,
        weights: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        if depth < 1:
            raise ConfigurationError(f"depth must be >= 1, got {depth}")
        if rrf_k <= 0:
            raise ConfigurationError(f"rrf_k must be > 0, got {rrf_k}")
        self.retrievers = (first, second)
        self.depth = depth
        self.rrf_k = rrf_k
        self.weights = weights

    @property
    def name(self) -> str:
        return f"hybrid({self.retrievers[0].name}+{self.retrievers[1].name})"

    def index(self, documents: Sequence[Document]) -> None:
        docs = list(documents)
        for r in self.retrievers:
            r.index(docs)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        if k < 1:
            raise InputError(f"k must be >= 1, got {k}")
        depth = max(self.depth, k)
        rankings = [r.search(query, depth) for r in self.retrievers]
        return rrf_fuse(rankings, k=k, rrf_k=self.rrf_k, weights=self.weights)

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        depth = max(self.depth, k)
        per_retriever = [r.search_batch(queries, depth) for r in self.retrievers]
        return [
            rrf_fuse([ranking[i] for ranking in per_retriever], k=k, rrf_k=self.rrf_k, weights=self.weights)
            for i in range(len(queries))
        ]
