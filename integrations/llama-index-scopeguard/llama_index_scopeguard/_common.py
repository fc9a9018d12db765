"""Glue shared by the LlamaIndex adapters: node conversion and the guard's decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

from llama_index_scopeguard._options import StrictOptions
from scopeguard import Document, Guard, PrereadJob, PrereadReport, Verdict
from scopeguard.client import GuardClient

AnyGuard = Guard | GuardClient
"""A local :class:`scopeguard.Guard` or a remote one (:class:`scopeguard.client.GuardClient`)."""

__all__ = [
    "METADATA_KEY",
    "Granularity",
    "Prereading",
    "ScopeGuardSpeculationEvent",
    "ScopeGuardVerdictEvent",
    "dispatch_speculation",
    "dispatch_verdict",
    "no_documents_verdict",
    "to_scopeguard",
    "verdict_metadata",
    "with_verdict",
]

METADATA_KEY = "scopeguard"
"""The node metadata key that carries the verdict (hidden from the LLM and the embedder)."""

Granularity = Literal["set", "document"]
"""``set``: one verdict for all retrieved nodes together; ``document``: one per node."""


def node_text(node: NodeWithScore | BaseNode) -> str:
    inner = node.node if isinstance(node, NodeWithScore) else node
    return inner.get_content(metadata_mode=MetadataMode.NONE)


def to_scopeguard(nodes: Sequence[NodeWithScore | BaseNode]) -> list[Document]:
    """Retrieved nodes (or nodes as they are indexed) -> scopeguard documents (nodes without text
    are skipped); the text is what the retrieved node will hold, without its metadata."""
    return [
        Document(text=text, id=n.node_id, metadata={"score": getattr(n, "score", None)})
        for n in nodes
        if (text := node_text(n)).strip()
    ]


class Prereading:
    """``preread`` and ``preread_in_background`` for an adapter with a ``guard``: read the index's
    nodes ahead of the questions."""

    if TYPE_CHECKING:
        guard: AnyGuard

    def preread(
        self, nodes: Sequence[BaseNode | NodeWithScore], *, progress: bool | None = None
    ) -> PrereadReport | int:
        """Have the guard's detector read ``nodes`` now and keep its state after each, so that a
        later query that retrieves one costs only its own tokens (:meth:`scopeguard.Guard.preread`;
        ``default`` and ``logprob`` with llama.cpp, on disk). Pass the nodes as the index holds them
        (after the node parser: ``index.docstore.docs.values()``, or use
        :class:`~llama_index_scopeguard.ScopeGuardPrereader` while indexing), not the ``Document``
        objects they were split from. Returns what the guard's ``preread`` returns: a
        :class:`scopeguard.PrereadReport` (passages kept, documents, seconds, bytes on disk; it
        compares like the passage count, 0 with a detector that does not pre-read) from a
        ``Guard``, the passages read from a ``GuardClient``."""
        return self.guard.preread(to_scopeguard(nodes), progress=progress)

    def preread_in_background(self, nodes: Sequence[BaseNode | NodeWithScore]) -> PrereadJob:
        """:meth:`preread` on a daemon thread, a node at a time and only while no check runs; the
        :class:`scopeguard.PrereadJob` comes back at once (``done()``, ``wait()``, ``cancel()``,
        and once done ``report``)."""
        return self.guard.preread_in_background(to_scopeguard(nodes))


def no_documents_verdict(guard: AnyGuard, rationale: str = "no documents were retrieved") -> Verdict:
    """Nothing (usable) was retrieved: nothing can support an answer."""
    return Verdict(
        label="out_of_scope", score=1.0, rationale=rationale, detector=getattr(guard.detector, "name", "")
    )


def verdict_metadata(verdict: Verdict, *, out_of_scope: bool, failed_closed: bool) -> dict[str, Any]:
    """A JSON-serialisable summary of a verdict for node metadata."""
    data = verdict.model_dump(mode="json", exclude={"votes"})
    data["out_of_scope"] = out_of_scope
    data["failed_closed"] = failed_closed
    return data


def with_verdict(node: NodeWithScore, metadata: dict[str, Any], key: str = METADATA_KEY) -> NodeWithScore:
    """A copy of ``node`` carrying ``metadata`` under ``key``, excluded from LLM and embedding text."""
    inner = node.node
    copy = inner.model_copy(
        update={
            "metadata": {**inner.metadata, key: metadata},
            "excluded_llm_metadata_keys": list(dict.fromkeys([*inner.excluded_llm_metadata_keys, key])),
            "excluded_embed_metadata_keys": list(dict.fromkeys([*inner.excluded_embed_metadata_keys, key])),
        }
    )
    return NodeWithScore(node=copy, score=node.score)


class ScopeGuardVerdictEvent(StrictOptions, BaseEvent):
    """A LlamaIndex instrumentation event for each verdict, sent inside the active span (the
    query engine's, or the postprocessing step's), so event handlers and tracers see it."""

    query: str
    component: str
    label: str
    score: float | None = None
    detector: str = ""
    stage: str = ""
    out_of_scope: bool
    failed_closed: bool
    action: str | None = None
    hedge: bool = False
    """In scope, in the calibration profile's hedge band (answered with a caveat)."""

    @classmethod
    def class_name(cls) -> str:
        return "ScopeGuardVerdictEvent"


_dispatcher = get_dispatcher(__name__)


class ScopeGuardSpeculationEvent(StrictOptions, BaseEvent):
    """A LlamaIndex instrumentation event for each speculative answer (``speculative=True``): its
    ``outcome`` (``released`` or ``discarded``) and, for a dropped one, what it cost: the seconds it
    ran and its tokens (the LLM's count, ``counted="tokens"``, else the chunks, ``"chunks"``)."""

    query: str
    component: str
    outcome: str
    discarded_seconds: float = 0.0
    discarded_tokens: int = 0
    counted: str = ""

    @classmethod
    def class_name(cls) -> str:
        return "ScopeGuardSpeculationEvent"


def dispatch_speculation(query: str, component: str, record: dict[str, Any] | None) -> None:
    """Send a :class:`ScopeGuardSpeculationEvent` for a result's speculation record (none: nothing)."""
    if record is None:
        return
    _dispatcher.event(
        ScopeGuardSpeculationEvent(
            query=query,
            component=component,
            outcome=record["outcome"],
            discarded_seconds=record.get("seconds", 0.0),
            discarded_tokens=record.get("tokens", 0),
            counted=record.get("counted", ""),
        )
    )


def dispatch_verdict(query: str, component: str, metadata: dict[str, Any], action: str | None = None) -> None:
    """Send a :class:`ScopeGuardVerdictEvent` for a :func:`verdict_metadata` dict."""
    _dispatcher.event(
        ScopeGuardVerdictEvent(
            query=query,
            component=component,
            label=metadata["label"],
            score=metadata.get("score"),
            detector=metadata.get("detector") or "",
            stage=metadata.get("stage") or "",
            out_of_scope=metadata["out_of_scope"],
            failed_closed=metadata["failed_closed"],
            action=action,
            hedge=bool(metadata.get("hedge")),
        )
    )
