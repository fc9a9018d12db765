"""The retriever protocol: ``index(documents)`` then ``search(query, k)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from scopeguard.types import Document

__all__ = ["Hit", "Retriever"]


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
