"""``GuardedQueryEngine``: retrieve, detect, then synthesize an answer or apply the policy."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.bridge.pydantic import model_validator
from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.response_synthesizers import BaseSynthesizer, get_response_synthesizer
from llama_index.core.schema import NodeWithScore

from llama_index_scopeguard._common import (
    AnyGuard,
    Prereading,
    dispatch_speculation,
    dispatch_verdict,
    no_documents_verdict,
    to_scopeguard,
    verdict_metadata,
)
from llama_index_scopeguard._options import StrictOptions
from llama_index_scopeguard.llm import ScopeGuardLLM
from scopeguard import Action, ConfigurationError, Verdict
from scopeguard._speculation import (
    AsyncHeldAnswer,
    Held,
    HeldAnswer,
    Tally,
    held_responder,
    speculation_metadata,
)
from scopeguard.policies import HedgePolicy, Policy, PolicyContext, PolicyOutcome, with_caveat
from scopeguard.prompts import fenced, render
from scopeguard.types import validate_question

__all__ = ["GuardedQueryEngine", "rag_prompt"]

METADATA_KEY = "scopeguard"


def _fenced_variable(name: str, /, **variables: Any) -> str:
    """The prompt variable ``name`` fenced (a ``function_mappings`` entry of :func:`rag_prompt`)."""
    return fenced(variables.get(name, ""))


def rag_prompt(template: str = "rag_basic") -> PromptTemplate:
    """One of scopeguard's RAG templates as a LlamaIndex QA prompt (``{context_str}``, ``{query_str}``).

    Both are fenced (:func:`scopeguard.prompts.fenced`) when the synthesizer formats the prompt,
    like every untrusted variable of the template: retrieved text or a question containing three
    double quotes cannot close the document block.
    """
    text = render(template, document="\x00context\x00", question="\x00query\x00")
    text = text.replace("{", "{{").replace("}", "}}")
    text = text.replace("\x00context\x00", "{context_str}").replace("\x00query\x00", "{query_str}")
    names = ("context_str", "query_str")
    return PromptTemplate(text, function_mappings={n: functools.partial(_fenced_variable, n) for n in names})


class GuardedQueryEngine(StrictOptions, Prereading, CustomQueryEngine):
    """A query engine that answers in-scope questions and responds with the guard's policy otherwise.

    The response's ``metadata["scopeguard"]`` holds ``verdict`` (a :class:`scopeguard.Verdict`),
    ``action`` (a :class:`scopeguard.Action`) and ``failed_closed``; ``source_nodes`` are the
    retrieved nodes either way. ``aquery`` is natively async (``aretrieve``, ``acheck``,
    ``asynthesize``, the policy's ``aapply``). With a streaming synthesizer
    (``get_response_synthesizer(streaming=True)``) an out-of-scope question gets a
    ``StreamingResponse`` (``AsyncStreamingResponse`` from ``aquery``) whose generator yields the
    policy's response, like an answer would. Each verdict is also sent as a
    :class:`~llama_index_scopeguard.ScopeGuardVerdictEvent` inside the engine's span.

    An in-scope question in the calibration profile's hedge band (``Guard(calibration=DIR)``,
    ``verdict.hedge``) is synthesized as usual and the guard's ``hedge`` policy qualifies it: with
    :class:`~scopeguard.policies.HedgePolicy` (the default) its caveat line follows the answer
    (a streamed answer yields it as a final token) and the action is ``Action.HEDGED``; another
    hedge policy responds like an out-of-scope policy; ``Guard(hedge=None)`` answers plainly.

    ``speculative=True`` starts the synthesis beside the check (a thread for ``query``, a task for
    ``aquery``) and holds it (a streamed one's tokens) until the verdict: released where the verdict
    leads to it (in scope, hedged, and a ``flag`` policy's answer when not streaming), dropped
    otherwise, a failed check included: the response is then exactly the policy's. The outcome is
    in ``metadata["scopeguard"]["speculation"]`` (a dropped answer's seconds and tokens) and a
    ``ScopeGuardSpeculationEvent`` (``llama_index_scopeguard._common``). It saves the check's time on
    answered questions and pays for dropped answers' tokens: worth it with an API LLM, not with a
    local LLM on the guard's CPU. LlamaIndex's own instrumentation, which has no per-call switch,
    still sees a dropped synthesis's events.

    ``preread(nodes)`` / ``preread_in_background(nodes)`` read the index's nodes ahead of the
    questions (``index.docstore.docs.values()``; :meth:`scopeguard.Guard.preread`).

    Args:
        retriever: any LlamaIndex retriever (``index.as_retriever()``).
        guard: a :class:`scopeguard.Guard` (detector, policy, ``on_error``; its ``llm`` serves
            the ``defuse`` policy).
        response_synthesizer: how in-scope answers are written; built from ``llm`` (or the
            guard's LLM wrapped in :class:`ScopeGuardLLM`) when not given.
        llm: a LlamaIndex LLM for the default synthesizer.
    """

    retriever: BaseRetriever
    guard: AnyGuard
    response_synthesizer: BaseSynthesizer | None = None
    llm: LLM | None = None
    speculative: bool = False

    @model_validator(mode="after")
    def _default_synthesizer(self) -> GuardedQueryEngine:
        if self.response_synthesizer is None:
            llm = self.llm
            if llm is None and self.guard.llm is not None:
                llm = ScopeGuardLLM(chat_model=self.guard.llm)
            if llm is None:
                raise ValueError(
                    "GuardedQueryEngine needs response_synthesizer=..., llm=... or a Guard with llm=..."
                )
            self.response_synthesizer = get_response_synthesizer(llm=llm)
        return self

    @property
    def _synthesizer(self) -> BaseSynthesizer:
        if self.response_synthesizer is None:  # only when someone reset it after construction
            raise ConfigurationError("GuardedQueryEngine.response_synthesizer is None")
        return self.response_synthesizer

    def _verdict_metadata(self, verdict: Verdict, action: Action, closed: bool) -> dict[str, Any]:
        return {METADATA_KEY: {"verdict": verdict, "action": action, "failed_closed": closed}}

    def _context(
        self, question: str, nodes: list[NodeWithScore], verdict: Verdict, held: Held | None = None
    ) -> PolicyContext:
        def responder(q: str, docs: Any) -> str:
            if held is not None and not self._streaming:  # the held synthesis, once
                return str(held_responder(held)(q, docs))
            return str(self._synthesizer.synthesize(q, nodes))

        return PolicyContext(
            question=question,
            documents=tuple(to_scopeguard(nodes)),
            verdict=verdict,
            llm=self.guard.llm,
            responder=responder,
        )

    # -- speculation --------------------------------------------------------------------------
    def _speculate(self, question: str, nodes: list[NodeWithScore]) -> HeldAnswer[Any] | None:
        """The synthesis started on a thread when ``speculative``: its response, then (streaming)
        its tokens, held until the verdict."""
        if not (self.speculative and nodes):
            return None

        def produce(tally: Tally) -> Iterator[Any]:
            response = self._synthesizer.synthesize(question, nodes)
            yield response
            if isinstance(response, StreamingResponse) and response.response_gen is not None:
                yield from response.response_gen

        return HeldAnswer(produce)

    def _aspeculate(self, question: str, nodes: list[NodeWithScore]) -> AsyncHeldAnswer[Any] | None:
        """:meth:`_speculate` as a task."""
        if not (self.speculative and nodes):
            return None

        async def produce(tally: Tally) -> AsyncIterator[Any]:
            response = await self._synthesizer.asynthesize(question, nodes)
            yield response
            if isinstance(response, AsyncStreamingResponse):
                async for token in response.response_gen:
                    yield token

        return AsyncHeldAnswer(produce)

    def _settled(self, question: str, response: RESPONSE_TYPE, held: Held | None) -> RESPONSE_TYPE:
        """``response`` with the speculative answer's outcome in its metadata (a held answer not
        released is dropped now), and the outcome sent as an event."""
        record = speculation_metadata(held).get("speculation")
        dispatch_speculation(question, "GuardedQueryEngine", record)
        if record is not None:
            meta = dict(response.metadata or {})
            meta[METADATA_KEY] = {**meta.get(METADATA_KEY, {}), "speculation": record}
            response.metadata = meta
        return response

    @staticmethod
    def _tag(response: RESPONSE_TYPE, metadata: dict[str, Any]) -> RESPONSE_TYPE:
        response.metadata = {**(response.metadata or {}), **metadata}
        return response

    @property
    def _streaming(self) -> bool:
        return bool(getattr(self._synthesizer, "_streaming", False))

    def _policy_response(
        self, text: str, nodes: list[NodeWithScore], metadata: dict[str, Any], *, is_async: bool
    ) -> RESPONSE_TYPE:
        """The policy's text in the response type the synthesizer would have returned."""
        if not self._streaming:
            return Response(response=text, source_nodes=nodes, metadata=metadata)
        if is_async:
            return AsyncStreamingResponse(
                response_gen=_one_token(text), source_nodes=nodes, metadata=metadata
            )
        return StreamingResponse(response_gen=_one_token_sync(text), source_nodes=nodes, metadata=metadata)

    def _trace(self, question: str, verdict: Verdict, oos: bool, closed: bool, action: Action) -> None:
        meta = verdict_metadata(verdict, out_of_scope=oos, failed_closed=closed)
        dispatch_verdict(question, "GuardedQueryEngine", meta, action.value)

    def _policy_result(
        self,
        outcome: PolicyOutcome,
        question: str,
        nodes: list[NodeWithScore],
        verdict: Verdict,
        oos: bool,
        closed: bool,
        *,
        is_async: bool,
    ) -> RESPONSE_TYPE:
        self._trace(question, verdict, oos, closed, outcome.action)
        metadata = self._verdict_metadata(verdict, outcome.action, closed)
        return self._policy_response(outcome.response, nodes, metadata, is_async=is_async)

    def _answered(
        self, response: RESPONSE_TYPE, hedge: Policy | None, verdict: Verdict, closed: bool
    ) -> RESPONSE_TYPE:
        """The synthesizer's response, with the caveat of a :class:`HedgePolicy` after it."""
        if isinstance(hedge, HedgePolicy):
            response = _with_caveat(response, hedge)
        return self._tag(response, self._verdict_metadata(verdict, _answer_action(hedge), closed))

    def custom_query(self, query_str: str) -> RESPONSE_TYPE:
        question = validate_question(query_str)
        nodes = self.retriever.retrieve(question)
        held = self._speculate(question, nodes)
        try:
            response = self._guarded_query(question, nodes, held)
        except BaseException:
            speculation_metadata(held)  # dropped
            raise
        return self._settled(question, response, held)

    def _guarded_query(
        self, question: str, nodes: list[NodeWithScore], held: HeldAnswer[Any] | None
    ) -> RESPONSE_TYPE:
        docs = to_scopeguard(nodes)
        verdict = self.guard.check(question, docs) if docs else no_documents_verdict(self.guard)
        oos, closed = self.guard.decide(verdict)
        hedge = None if oos else self.guard.hedging(verdict)
        if oos or (hedge is not None and not isinstance(hedge, HedgePolicy)):
            outcome = (hedge or self.guard.policy).apply(self._context(question, nodes, verdict, held))
            return self._policy_result(outcome, question, nodes, verdict, oos, closed, is_async=False)
        self._trace(question, verdict, oos, closed, _answer_action(hedge))
        if held is None:
            response = self._synthesizer.synthesize(question, nodes)
        else:
            chunks = held.release()
            response = next(chunks)
            if isinstance(response, StreamingResponse):
                response.response_gen = chunks  # type: ignore[assignment]  # the held tokens, then the rest
        return self._answered(response, hedge, verdict, closed)

    async def acustom_query(self, query_str: str) -> RESPONSE_TYPE:
        question = validate_question(query_str)
        nodes = await self.retriever.aretrieve(question)
        held = self._aspeculate(question, nodes)
        try:
            response = await self._aguarded_query(question, nodes, held)
        except BaseException:
            speculation_metadata(held)
            raise
        return self._settled(question, response, held)

    async def _aguarded_query(
        self, question: str, nodes: list[NodeWithScore], held: AsyncHeldAnswer[Any] | None
    ) -> RESPONSE_TYPE:
        docs = to_scopeguard(nodes)
        verdict = await self.guard.acheck(question, docs) if docs else no_documents_verdict(self.guard)
        oos, closed = self.guard.decide(verdict)
        hedge = None if oos else self.guard.hedging(verdict)
        if oos or (hedge is not None and not isinstance(hedge, HedgePolicy)):
            ctx = self._context(question, nodes, verdict, held)
            outcome = await (hedge or self.guard.policy).aapply(ctx)
            return self._policy_result(outcome, question, nodes, verdict, oos, closed, is_async=True)
        self._trace(question, verdict, oos, closed, _answer_action(hedge))
        if held is None:
            response = await self._synthesizer.asynthesize(question, nodes)
        else:
            chunks = held.release()
            response = await anext(chunks)
            if isinstance(response, AsyncStreamingResponse):
                response.response_gen = chunks  # type: ignore[assignment]  # the held tokens, then the rest
        return self._answered(response, hedge, verdict, closed)


def _answer_action(hedge: Policy | None) -> Action:
    return Action.ANSWERED if hedge is None else Action.HEDGED


def _with_caveat(response: RESPONSE_TYPE, hedge: HedgePolicy) -> RESPONSE_TYPE:
    """``response`` with ``hedge``'s caveat after its text (streamed: as a final token). A
    structured (``PydanticResponse``) answer has no text to add it to: its metadata says hedged."""
    if isinstance(response, Response):
        if response.response is not None:
            response.response = with_caveat(response.response, hedge.caveat)
    elif isinstance(response, (StreamingResponse, AsyncStreamingResponse)) and response.response_txt:
        response.response_txt = with_caveat(response.response_txt, hedge.caveat)  # already read
    elif isinstance(response, AsyncStreamingResponse):
        response.response_gen = hedge.acaveat_stream(response.response_gen)  # type: ignore[assignment]
    elif isinstance(response, StreamingResponse) and response.response_gen is not None:
        response.response_gen = hedge.caveat_stream(response.response_gen)  # type: ignore[assignment]
    return response


def _one_token_sync(text: str) -> Generator[str, None, None]:
    yield text


async def _one_token(text: str) -> AsyncGenerator[str, None]:
    yield text
