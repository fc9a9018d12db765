"""Glue shared by the LangChain adapters: document conversion and the guard's decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.documents import Document as LCDocument

from scopeguard import Document, Guard, Verdict

__all__ = ["METADATA_KEY", "Granularity", "to_scopeguard", "verdict_metadata", "with_verdict"]

METADATA_KEY = "scopeguard"
"""The metadata key under which the verdict is attached to each document."""

Granularity = Literal["set", "document"]
"""``set``: one verdict for all retrieved documents together; ``document``: one per document."""


def to_scopeguard(documents: Sequence[LCDocument]) -> list[Document]:
    """LangChain documents -> scopeguard documents (empty texts are skipped)."""
    out = []
    for i, d in enumerate(documents):
        if d.page_content and d.page_content.strip():
            out.append(Document(text=d.page_content, id=str(d.id or i), metadata=dict(d.metadata)))
    return out


def no_documents_verdict(guard: Guard) -> Verdict:
    """Nothing was retrieved: nothing can support an answer."""
    return Verdict(
        label="out_of_scope",
        score=1.0,
        rationale="no documents were retrieved",
        detector=getattr(guard.detector, "name", ""),
    )


def verdict_metadata(verdict: Verdict, *, out_of_scope: bool, failed_closed: bool) -> dict[str, Any]:
    """A JSON-serialisable summary of a verdict for document metadata."""
    data = verdict.model_dump(mode="json", exclude={"votes"})
    data["out_of_scope"] = out_of_scope
    data["failed_closed"] = failed_closed
    return data


def with_verdict(document: LCDocument, metadata: dict[str, Any], key: str = METADATA_KEY) -> LCDocument:
    """A copy of ``document`` carrying ``metadata`` under ``key`` (the input is not mutated)."""
    return document.model_copy(update={"metadata": {**document.metadata, key: metadata}})
