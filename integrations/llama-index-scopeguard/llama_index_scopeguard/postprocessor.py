"""``ScopeGuardPostprocessor``: a node postprocessor that drops (or flags) out-of-scope nodes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_scopeguard._common import (
    METADATA_KEY,
    AnyGuard,
    Granularity,
    Prereading,
    dispatch_verdict,
    no_documents_verdict,
    to_scopeguard,
    verdict_metadata,
    with_verdict,
)
from llama_index_scopeguard._options import StrictOptions
from scopeguard import InputError, Verdict
from scopeguard.policies import FlagOnlyPolicy, PolicyContext, PolicyOutcome

__all__ = ["ScopeGuardPostprocessor"]


class ScopeGuardPostprocessor(StrictOptions, Prereading, BaseNodePostprocessor):
    """Ask the guard's detector whether the retrieved nodes answer the query.

    Every kept node carries the verdict under ``node.metadata["scopeguard"]`` (hidden from the
    LLM prompt and the embedder). With ``drop_out_of_scope=True`` (default) out-of-scope nodes
    are removed, so the synthesizer gets no misleading context; with ``on_error="fail_closed"``
    a failed detector removes them too. Under the guard's ``flag`` policy nothing is dropped.

    When every node is dropped, one node takes their place (``respond_with_policy``, default):
    its text is the guard policy's response (``clarify``: what the documents do not cover) and
    its ``metadata["scopeguard"]`` holds the verdict plus ``action``, ``policy_response`` and
    ``replaced_nodes``. The engine then answers from that text, and ``response.source_nodes``
    shows why, instead of an "Empty Response" that looks like an empty index. Each verdict is
    also sent as a :class:`~llama_index_scopeguard.ScopeGuardVerdictEvent` in the active span.

    ``preread(nodes)`` / ``preread_in_background(nodes)`` read the index's nodes ahead of the
    questions (:meth:`scopeguard.Guard.preread`; while indexing:
    :class:`~llama_index_scopeguard.ScopeGuardPrereader`).

    Args:
        guard: a :class:`scopeguard.Guard`.
        granularity: ``"set"`` (default) checks all nodes together, ``"document"`` each node alone.
        drop_out_of_scope: remove out-of-scope nodes instead of only annotating them.
        metadata_key: where the verdict goes in each node's metadata.
        respond_with_policy: replace an all-dropped result by the policy's response node
            (``False``: return no nodes).

    >>> engine = index.as_query_engine(node_postprocessors=[ScopeGuardPostprocessor(guard=guard)])
    """

    guard: AnyGuard
    granularity: Granularity = "set"
    drop_out_of_scope: bool = True
    metadata_key: str = METADATA_KEY
    respond_with_policy: bool = True

    @classmethod
    def class_name(cls) -> str:
        return "ScopeGuardPostprocessor"

    def _query(self, query_bundle: QueryBundle | None) -> str:
        if query_bundle is None:
            raise InputError(
                "ScopeGuardPostprocessor needs the query: call postprocess_nodes(nodes, query_str=...)"
            )
        return query_bundle.query_str

    @property
    def _drops(self) -> bool:
        return self.drop_out_of_scope and not isinstance(self.guard.policy, FlagOnlyPolicy)

    def _apply(
        self, query: str, nodes: Sequence[NodeWithScore], verdicts: Sequence[Verdict]
    ) -> tuple[list[NodeWithScore], tuple[Verdict, dict[str, Any]] | None]:
        """The kept nodes, annotated, and (the first verdict, its metadata) when every node was
        dropped and a policy node should take their place."""
        out = []
        traced: dict[int, dict[str, Any]] = {}
        for node, verdict in zip(nodes, verdicts, strict=True):
            oos, closed = self.guard.decide(verdict)
            meta = traced.setdefault(
                id(verdict), verdict_metadata(verdict, out_of_scope=oos, failed_closed=closed)
            )
            if self._drops and oos:
                continue
            out.append(with_verdict(node, meta, self.metadata_key))
        for meta in traced.values():
            dispatch_verdict(query, "ScopeGuardPostprocessor", meta)
        if out or not nodes or not self.respond_with_policy:
            return out, None
        return out, (verdicts[0], traced[id(verdicts[0])])

    def _policy_context(self, query: str, nodes: Sequence[NodeWithScore], verdict: Verdict) -> PolicyContext:
        return PolicyContext(
            question=query,
            documents=tuple(to_scopeguard(nodes)),
            verdict=verdict,
            llm=self.guard.llm,
        )

    def _policy_node(self, outcome: PolicyOutcome, meta: dict[str, Any], replaced: int) -> NodeWithScore:
        data = {**meta, "action": outcome.action.value, "policy_response": outcome.response}
        data["replaced_nodes"] = replaced
        node = TextNode(
            text=outcome.response,
            metadata={self.metadata_key: data},
            excluded_llm_metadata_keys=[self.metadata_key],
            excluded_embed_metadata_keys=[self.metadata_key],
        )
        return NodeWithScore(node=node, score=None)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        if self.granularity == "set":
            docs = to_scopeguard(nodes)
            verdict = self.guard.check(query, docs) if docs else no_documents_verdict(self.guard)
            verdicts = [verdict] * len(nodes)
        else:
            verdicts = [
                self.guard.check(query, docs)
                if (docs := to_scopeguard([n]))
                else no_documents_verdict(self.guard, "the node is empty")
                for n in nodes
            ]
        out, dropped = self._apply(query, nodes, verdicts)
        if dropped is None:
            return out
        outcome = self.guard.policy.apply(self._policy_context(query, nodes, dropped[0]))
        return [self._policy_node(outcome, dropped[1], len(nodes))]

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = self._query(query_bundle)
        if not nodes:
            return []
        if self.granularity == "set":
            docs = to_scopeguard(nodes)
            verdict = await self.guard.acheck(query, docs) if docs else no_documents_verdict(self.guard)
            verdicts = [verdict] * len(nodes)
        else:
            sem = asyncio.Semaphore(self.guard.concurrency)

            async def one(node: NodeWithScore) -> Verdict:
                docs = to_scopeguard([node])
                if not docs:
                    return no_documents_verdict(self.guard, "the node is empty")
                async with sem:
                    return await self.guard.acheck(query, docs)

            verdicts = list(await asyncio.gather(*(one(n) for n in nodes)))
        out, dropped = self._apply(query, nodes, verdicts)
        if dropped is None:
            return out
        outcome = await self.guard.policy.aapply(self._policy_context(query, nodes, dropped[0]))
        return [self._policy_node(outcome, dropped[1], len(nodes))]
