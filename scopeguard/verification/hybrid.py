"""Reciprocal-rank fusion of two retrievers, and the retriever names the verifier accepts.

:class:`HybridRetriever` runs two :class:`~scopeguard.retrieval.base.Retriever` (for example
BM25 and a dense SBERT index) to depth ``depth`` each and fuses their rankings with
reciprocal-rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009)::

    score(d) = sum_r  weight_r / (rrf_k + rank_r(d))

Documents are identified by ``Document.id`` (their content hash when the id is empty).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.retrieval.base import Hit, Retriever
from scopeguard.types import Document

__all__ = [
    "BM25_MSMARCO",
    "DEFAULT_DENSE_MODEL",
    "HybridRetriever",
    "available_retrievers",
    "make_retriever",
    "rrf_fuse",
]

BM25_MSMARCO: dict[str, float] = {"k1": 0.82, "b": 0.68}
"""BM25 parameters tuned for MS MARCO passage ranking, as used by the answer-verification paper."""


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


DEFAULT_DENSE_MODEL = "minilm"
"""The packaged all-MiniLM-L6-v2 (fast, offline); ``model="sbert"`` (mpnet) or any name/path also works."""


def _bm25(**kw: Any) -> Retriever:
    from scopeguard.retrieval.registry import get_retriever

    return get_retriever("bm25", **{**BM25_MSMARCO, **kw})


def _dense(model: str = DEFAULT_DENSE_MODEL, **kw: Any) -> Retriever:
    """A registered dense name (``minilm``, ``sbert``, ``bge``...) or any sentence-transformers model."""
    from scopeguard.retrieval.registry import available_retrievers as registered
    from scopeguard.retrieval.registry import get_retriever

    name = model if model in registered() and model not in ("bm25", "bm25s") else f"dense:{model}"
    return get_retriever(name, **kw)


def _hybrid(model: str = DEFAULT_DENSE_MODEL, **kw: Any) -> Retriever:
    return HybridRetriever(_bm25(), _dense(model), **kw)


_FACTORIES: dict[str, Callable[..., Retriever]] = {"bm25": _bm25, "dense": _dense, "hybrid": _hybrid}


def available_retrievers() -> list[str]:
    return sorted(_FACTORIES)


def make_retriever(name: str, **kwargs: Any) -> Retriever:
    """The verifier's retrievers by name: ``bm25`` (Lucene BM25, k1 0.82, b 0.68), ``dense``
    (``model=`` picks the embedding model, default packaged MiniLM) or ``hybrid`` (RRF of the two)."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown retriever {name!r}; valid names: {', '.join(available_retrievers())}"
        ) from None
    return factory(**kwargs)
