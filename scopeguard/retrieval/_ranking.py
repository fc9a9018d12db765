"""Deterministic top-k selection shared by every retriever.

Ties are broken by document order: among equal scores the document indexed first ranks first.
This makes rankings (and therefore Recall@k / MRR) reproducible across runs and backends.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scopeguard.errors import InputError
from scopeguard.retrieval.base import Hit, check_k
from scopeguard.types import Document

__all__ = ["IndexedDocuments", "check_documents", "check_k", "hits_from_scores", "top_k", "validate_query"]


class IndexedDocuments:
    """Base of a retriever that keeps the documents it indexed (``self._documents``, in order):
    ``len(retriever)`` and ``retriever.documents``."""

    _documents: list[Document]

    def __len__(self) -> int:
        return len(self._documents)

    @property
    def documents(self) -> tuple[Document, ...]:
        return tuple(self._documents)


def check_documents(documents: Sequence[Document], *, nonempty: bool = False) -> list[Document]:
    """``documents`` as a list, or an :class:`InputError` for an empty corpus, a non-Document item or
    (``nonempty=True``) a document with no text."""
    docs = list(documents)
    if not docs:
        raise InputError("cannot index an empty corpus: pass at least one document")
    for i, d in enumerate(docs):
        if not isinstance(d, Document):
            raise InputError(f"documents[{i}] is a {type(d).__name__}, expected scopeguard.Document")
        if nonempty and not d.text.strip():
            raise InputError(f"document {d.id or i} is empty")
    return docs


def validate_query(query: str) -> str:
    if not isinstance(query, str):
        raise InputError(f"query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise InputError("query is empty")
    return query


def top_k(scores: npt.ArrayLike, k: int) -> npt.NDArray[np.int64]:
    """Indices of the ``k`` best scores: score descending, then index ascending (stable ties).

    ``k`` larger than the number of scores returns every index.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    n = s.shape[0]
    k = min(check_k(k), n)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if k < n:
        # every index whose score reaches the k-th best: keeps all ties at the boundary
        threshold = np.partition(s, n - k)[n - k]
        candidates = np.flatnonzero(s >= threshold)
    else:
        candidates = np.arange(n)
    order = np.lexsort((candidates, -s[candidates]))
    return candidates[order][:k].astype(np.int64)


def hits_from_scores(documents: Sequence[Document], scores: npt.ArrayLike, k: int) -> list[Hit]:
    """Rank ``documents`` by ``scores`` (see :func:`top_k`) into 1-based :class:`Hit` objects."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    return [Hit(document=documents[int(i)], score=float(s[i]), rank=r) for r, i in enumerate(top_k(s, k), 1)]
