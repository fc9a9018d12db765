"""``ScopeGuardPrereader``: an ingestion step that pre-reads the nodes as they are indexed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, TransformComponent

from llama_index_scopeguard._common import AnyGuard, Prereading
from llama_index_scopeguard._options import StrictOptions
from scopeguard import PrereadJob

__all__ = ["ScopeGuardPrereader"]


class ScopeGuardPrereader(StrictOptions, Prereading, TransformComponent):
    """Pre-read every node that passes through, after the node parser, and pass it on unchanged:
    the guard's detector reads each node's text once and keeps its state (``default`` and
    ``logprob`` with llama.cpp, on disk), so a later query that retrieves it costs only the
    question (see :meth:`scopeguard.Guard.preread`).

    >>> index = VectorStoreIndex.from_documents(
    ...     documents, transformations=[SentenceSplitter(), ScopeGuardPrereader(guard=guard)]
    ... )

    (or in an ``IngestionPipeline``'s transformations, after the splitter.)

    Args:
        guard: a :class:`scopeguard.Guard` (or a :class:`scopeguard.client.GuardClient`).
        background: pre-read on a daemon thread and return at once (between checks; the
            :class:`scopeguard.PrereadJob` of each call is in :attr:`jobs`) instead of reading
            before the index is built.
    """

    guard: AnyGuard
    background: bool = False
    _jobs: list[PrereadJob] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "ScopeGuardPrereader"

    @property
    def jobs(self) -> list[PrereadJob]:
        """The background pre-reads started so far (with ``background=True``), one per call."""
        return list(self._jobs)

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        if self.background:
            self._jobs.append(self.preread_in_background(nodes))
        else:
            self.preread(nodes, progress=bool(kwargs.get("show_progress", False)))
        return nodes
