"""Glue shared by the LangChain adapters: document conversion and the guard's decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.callbacks import BaseCallbackManager, Callbacks
from langchain_core.documents import Document as LCDocument
from langchain_core.runnables import RunnableConfig, RunnableLambda

from scopeguard import Document, Guard, PrereadJob, PrereadReport, Verdict
from scopeguard.client import GuardClient

AnyGuard = Guard | GuardClient
"""A local :class:`scopeguard.Guard` or a remote one (:class:`scopeguard.client.GuardClient`)."""

__all__ = [
    "METADATA_KEY",
    "VERDICT_RUN_NAME",
    "Granularity",
    "Prereading",
    "atrace_verdicts",
    "to_scopeguard",
    "trace_verdicts",
    "traced",
    "verdict_config",
    "verdict_metadata",
    "with_verdict",
]

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


class Prereading:
    """``preread`` and ``preread_in_background`` for an adapter with a ``guard``: read the corpus's
    chunks (LangChain documents, as they go into the vector store) ahead of the questions."""

    if TYPE_CHECKING:
        guard: AnyGuard

    def preread(
        self, documents: Sequence[LCDocument], *, progress: bool | None = None
    ) -> PrereadReport | int:
        """Have the guard's detector read ``documents`` now and keep its state after each, so that
        a later question whose retrieval returns one costs only its own tokens
        (:meth:`scopeguard.Guard.preread`; ``default`` and ``logprob`` with llama.cpp, on disk).
        Pre-read the chunks as they are indexed: a chunk is matched by its ``page_content``.
        Returns what the guard's ``preread`` returns: a :class:`scopeguard.PrereadReport` (passages
        kept, documents, seconds, bytes on disk; it compares like the passage count, 0 with a
        detector that does not pre-read) from a ``Guard``, the passages read from a ``GuardClient``."""
        return self.guard.preread(to_scopeguard(documents), progress=progress)

    def preread_in_background(self, documents: Sequence[LCDocument]) -> PrereadJob:
        """:meth:`preread` on a daemon thread, one document at a time and only while no check is
        running; returns the :class:`scopeguard.PrereadJob` at once (``done()``, ``wait()``,
        ``cancel()``, ``read`` of ``total``, ``error``, and once done ``report``)."""
        return self.guard.preread_in_background(to_scopeguard(documents))


def no_documents_verdict(guard: AnyGuard) -> Verdict:
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


VERDICT_RUN_NAME = "ScopeGuardVerdict"
"""The traced child run that carries each verdict in its metadata and tags."""


def verdict_config(metadata: dict[str, Any]) -> RunnableConfig:
    """Run metadata and tags for a verdict (a :func:`verdict_metadata` dict).

    Flat ``scopeguard_*`` metadata keys (label, score, detector, stage, out_of_scope,
    failed_closed, error_kind, hedge) and a ``scopeguard:<label>`` tag (plus
    ``scopeguard:failed_closed`` and ``scopeguard:hedge``), so a tracer such as LangSmith can
    filter runs on them.
    """
    keys = ("label", "score", "detector", "stage", "out_of_scope", "failed_closed", "error_kind", "hedge")
    tags = [f"scopeguard:{metadata['label']}"]
    if metadata.get("failed_closed"):
        tags.append("scopeguard:failed_closed")
    if metadata.get("hedge"):
        tags.append("scopeguard:hedge")
    return {"metadata": {f"scopeguard_{k}": metadata.get(k) for k in keys}, "tags": tags}


def _verdict_run(metadata: dict[str, Any]) -> RunnableLambda[Any, Any]:
    return RunnableLambda(lambda _: metadata, name=VERDICT_RUN_NAME)


def traced(callbacks: Callbacks) -> bool:
    """Whether ``callbacks`` has a handler to trace to."""
    if isinstance(callbacks, BaseCallbackManager):
        return bool(callbacks.handlers)
    return bool(callbacks)


def trace_verdicts(callbacks: Callbacks, verdicts: Sequence[dict[str, Any]]) -> None:
    """Record each verdict as a ``ScopeGuardVerdict`` child run of ``callbacks``' parent run,
    with the verdict in the run's metadata and tags (:func:`verdict_config`) and as its output."""
    if not traced(callbacks):
        return
    for meta in verdicts:
        _verdict_run(meta).invoke(meta, {**verdict_config(meta), "callbacks": callbacks})


async def atrace_verdicts(callbacks: Callbacks, verdicts: Sequence[dict[str, Any]]) -> None:
    """The async twin of :func:`trace_verdicts`."""
    if not traced(callbacks):
        return
    for meta in verdicts:
        await _verdict_run(meta).ainvoke(meta, {**verdict_config(meta), "callbacks": callbacks})
