"""``ScopeGuardPostprocessor``: a node postprocessor that drops (or flags) out-of-scope nodes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_scopeguard._common import (
    METADATA_KEY,
    Granularity,
    no_documents_verdict,
    to_scopeguard,
    verdict_metadata,
    with_verdict,
)
from scopeguard import Guard, InputError, Verdict

__all__ = ["ScopeGuardPostprocessor"]


class ScopeGuardPostprocessor(BaseNodePostprocessor):
    """Ask the guard's detector whether the retrieved nodes answer the query.

    Every kept node carries the verdict under ``node.metadata["scopeguard"]`` (hidden from the
    LLM prompt and the embedder). With ``drop_out_of_scope=True`` (default) out-of-scope nodes
    are removed, so the synthesizer gets no misleading context; with ``on_error="fail_closed"``
    a failed detector removes them too.

    Args:
        guard: a :class:`scopeguard.Guard`.
        granularity: ``"set"`` (default) checks all nodes together, ``"document"`` each node alone.
        drop_out_of_scope: remove out-of-scope nodes instead of only annotating them.
        metadata_key: where the verdict goes in each node's metadata.

    >>> engine = index.as_query_engine(node_postprocessors=[ScopeGuardPostprocessor(guard=guard)])
    """

    guard: Guard
    granularity: Granularity = "set"
    drop_out_of_scope: bool = True
    metadata_key: str = METADATA_KEY

    @classmethod
    def class_name(cls) -> str:
        return "ScopeGuardPostprocessor"

    def _query(self, query_bundle: QueryBundle | None) -> str:
        if query_bundle is None:
            raise InputError(
                "ScopeGuardPostprocessor needs the query: call postprocess_nodes(nodes, query_str=...)"
            )
        return query_bundle.query_str

    def _apply(self, nodes: Sequence[NodeWithScore], verdicts: Sequence[Verdict]) -> list[NodeWithScore]:
        out = []
        for node, verdict in zip(nodes, verdicts, strict=True):
            oos, closed = self.guard.decide(verdict)
            if self.drop_out_of_scope and oos:
                continue
            meta = verdict_metadata(verdict, out_of_scope=oos, failed_closed=closed)
            out.append(with_verdict(node, meta, self.metadata_key))
        return out

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        if self.granularity == "set":
            docs = to_scopeguard(nodes)
            verdict = self.guard.check(query, docs) if docs else no_documents_verdict(self.guard)
            return self._apply(nodes, [verdict] * len(nodes))
        verdicts = [
            self.guard.check(query, docs)
            if (docs := to_scopeguard([n]))
            else no_documents_verdict(self.guard, "the node is empty")
            for n in nodes
        ]
        return self._apply(nodes, verdicts)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        if self.granularity == "set":
            docs = to_scopeguard(nodes)
            verdict = await self.guard.acheck(query, docs) if docs else no_documents_verdict(self.guard)
            return self._apply(nodes, [verdict] * len(nodes))
        sem = asyncio.Semaphore(self.guard.concurrency)

        async def one(node: NodeWithScore) -> Verdict:
            docs = to_scopeguard([node])
            if not docs:
                return no_documents_verdict(self.guard, "the node is empty")
            async with sem:
                return await self.guard.acheck(query, docs)

        return self._apply(nodes, await asyncio.gather(*(one(n) for n in nodes)))
