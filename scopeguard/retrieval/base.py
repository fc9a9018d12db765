"""The retriever protocol: ``index(documents)`` then ``search(query, k)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict

from scopeguard.errors import InputError
from scopeguard.types import Document

__all__ = ["Hit", "Retriever", "check_k", "retrieve"]


class Hit(BaseModel):
    """One ranked result: the document, its score and its 1-based rank."""

    model_config = ConfigDict(frozen=True)

    document: Document
    score: float
    rank: int


@runtime_checkable
class Retriever(Protocol):
    @property
    def name(self) -> str: ...

    def index(self, documents: Sequence[Document]) -> None: ...

    def search(self, query: str, k: int = 10) -> list[Hit]: ...

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]: ...


def check_k(k: int) -> int:
    """Return ``k`` or raise :class:`InputError` when it is not a positive integer."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k must be a positive integer: at least 1, got {k!r}")
    return int(k)


def retrieve(
    retriever: Retriever, documents: Sequence[Document], queries: Sequence[str], k: int
) -> list[list[Hit]]:
    """Index ``documents`` with ``retriever`` and return the top ``k`` hits of each of ``queries``,
    best first (fewer when the corpus is smaller): what a RAG pipeline's retriever hands the guard."""
    check_k(k)
    retriever.index(list(documents))
    return retriever.search_batch(list(queries), k=min(k, len(documents)))
