"""Helpers for the verification tests: a tiny term-overlap retriever (no extras needed) and a corpus."""

from __future__ import annotations

import re
from collections.abc import Sequence

from scopeguard.retrieval.base import Hit
from scopeguard.types import Document


def _terms(text: str) -> set[str]:
    return {t for t in re.findall(r"\w+", text.lower()) if len(t) > 2}


class TinyRetriever:
    """Ranks documents by the number of query terms (3+ letters) they share; zero-overlap is no hit."""

    def __init__(self, name: str = "tiny") -> None:
        self._name = name
        self.docs: list[Document] = []
        self.queries: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def index(self, documents: Sequence[Document]) -> None:
        self.docs = list(documents)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        self.queries.append(query)
        q = _terms(query)
        scored = [(len(q & _terms(d.text)), i, d) for i, d in enumerate(self.docs)]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
        return [Hit(document=d, score=float(s), rank=r) for r, (s, _, d) in enumerate(ranked, 1)]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]


CORPUS = [
    Document(id="p1", text="The Zorbian lighthouse was painted bright green in 1931 by the harbour guild."),
    Document(id="p2", text="Marlow pies are baked with quince and served cold at the spring fair."),
    Document(id="p3", text="The harbour guild of Zorbia meets every Tuesday beside the lighthouse."),
]
