"""The retrievers the verifier builds by name, from the one registry (:mod:`scopeguard.retrieval.registry`).

The verifier's names are those of Huo, Arabzadeh & Clarke's conditions: ``bm25`` is the registry's
``bm25-msmarco`` (k1 0.82, b 0.68), ``dense`` and ``hybrid`` (RRF of the two) are registry
entries of the same name. Each may carry a reranker, ``bm25+rerank:monot5`` (the "Neural"
condition; add the reader for "Neural + Reader"), and any other registry name or spec is
accepted as it is. Reciprocal-rank fusion lives in :mod:`scopeguard.retrieval.fusion`.
"""

from __future__ import annotations

from typing import Any

from scopeguard.errors import ConfigurationError
from scopeguard.retrieval.base import Retriever
from scopeguard.retrieval.fusion import HybridRetriever, rrf_fuse
from scopeguard.retrieval.registry import (
    BM25_MSMARCO,
    DEFAULT_DENSE_MODEL,
    RERANK_SEPARATOR,
    available_retrievers,
    get_retriever,
    is_retriever_spec,
)

__all__ = [
    "BM25_MSMARCO",
    "DEFAULT_DENSE_MODEL",
    "VERIFIER_RETRIEVERS",
    "HybridRetriever",
    "make_retriever",
    "rrf_fuse",
]

VERIFIER_RETRIEVERS: dict[str, str] = {"bm25": "bm25-msmarco", "dense": "dense", "hybrid": "hybrid"}
"""The verifier's retriever names and the registry entries they build."""


def make_retriever(name: str, **kwargs: Any) -> Retriever:
    """The verifier's retriever by name: ``bm25`` (Lucene BM25, k1 0.82, b 0.68), ``dense``
    (``model=`` picks the embedding model, default packaged MiniLM) or ``hybrid`` (RRF of the two),
    optionally followed by ``+rerank:RERANKER``; or any other registry name or spec."""
    spec = name.strip() if isinstance(name, str) else ""
    first, sep, reranker = spec.partition(RERANK_SEPARATOR)
    first = VERIFIER_RETRIEVERS.get(first.strip(), first.strip())
    if not spec or not is_retriever_spec(first):
        raise ConfigurationError(
            f"unknown retriever {name!r}; valid names: {', '.join(VERIFIER_RETRIEVERS)}, each optionally "
            f"followed by {RERANK_SEPARATOR}RERANKER (e.g. bm25{RERANK_SEPARATOR}monot5), or a registry "
            f"name: {', '.join(available_retrievers())}, dense:NAME_OR_PATH"
        )
    return get_retriever(first + sep + reranker, **kwargs)
