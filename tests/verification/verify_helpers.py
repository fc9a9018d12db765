"""Helpers for the verification tests: a tiny term-overlap retriever (no extras needed) and a corpus."""

from __future__ import annotations

from scopeguard.testing import InMemoryRetriever as TinyRetriever
from scopeguard.types import Document

__all__ = ["CORPUS", "TinyRetriever"]


CORPUS = [
    Document(id="p1", text="The Zorbian lighthouse was painted bright green in 1931 by the harbour guild."),
    Document(id="p2", text="Marlow pies are baked with quince and served cold at the spring fair."),
    Document(id="p3", text="The harbour guild of Zorbia meets every Tuesday beside the lighthouse."),
]
