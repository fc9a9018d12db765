"""``GuardedRAG``: question -> retrieve -> detect -> answer with your chain, or apply the policy."""

from __future__ import annotations

import functools
import operator
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.documents import Document as LCDocument
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from langchain_core.runnables.config import merge_configs
from langchain_core.runnables.utils import AddableDict
from pydantic import ConfigDict, model_validator
from typing_extensions import TypedDict

from langchain_scopeguard._answering import Answering
from langchain_scopeguard._common import (
    AnyGuard,
    Prereading,
    atrace_verdicts,
    no_documents_verdict,
    to_scopeguard,
    trace_verdicts,
    verdict_config,
    verdict_metadata,
)
from langchain_scopeguard._speculative import (
    atrace_speculation,
    settle,
    trace_speculation,
)
from scopeguard import Action, InputError, Verdict
from scopeguard._speculation import (
    AsyncHeldAnswer,
    Held,
    HeldAnswer,
    held_responder,
)
from scopeguard.policies import (
    FlagOnlyPolicy,
    HedgePolicy,
    Policy,
    PolicyContext,
    PolicyOutcome,
)
from scopeguard.prompts import fenced, render
from scopeguard.types import StrictOptions, validate_question

__all__ = ["GuardedOutput", "GuardedRAG", "rag_prompt"]

GuardedInput = str | Mapping[str, Any]


class GuardedOutput(TypedDict):
    """What :class:`GuardedRAG` returns (as an ``AddableDict``, so streamed chunks add up)."""

    question: str
    documents: list[LCDocument]
    verdict: Verdict
    failed_closed: bool
    action: Action
    answer: str


def _join_documents(documents: Sequence[LCDocument]) -> str:
    """The default ``format_documents``: page contents fenced (:func:`scopeguard.prompts.fenced`),
    so that a document cannot close the triple-quoted block a RAG prompt puts the context in."""
    return "\n\n".join(fenced(d.page_content) for d in documents)


class _FencedPromptTemplate(PromptTemplate):
    """A prompt whose input variables go through :func:`scopeguard.prompts.fenced`, as in the template.

    Not serializable: loaded back it would be a plain ``PromptTemplate`` that fences nothing.
    """

    @classmethod
    def is_lc_serializable(cls) -> bool:
        return False

    def format(self, **kwargs: Any) -> str:
        names = set(self.input_variables)
        return super().format(**{k: fenced(v) if k in names else v for k, v in kwargs.items()})


def rag_prompt(template: str = "rag_basic") -> PromptTemplate:
    """One of scopeguard's RAG templates as a LangChain prompt with ``{context}`` and ``{question}``.

    Both are fenced when the prompt is formatted, like every untrusted variable of the template:
    a context or question containing three double quotes cannot close the document block.
    """
    text = render(template, document="\x00context\x00", question="\x00question\x00")
    text = text.replace("{", "{{").replace("}", "}}")
    text = text.replace("\x00context\x00", "{context}").replace("\x00question\x00", "{question}")
    return _FencedPromptTemplate.from_template(text)


class GuardedRAG(StrictOptions, Prereading, Answering, RunnableSerializable[GuardedInput, AddableDict]):
    """A guarded RAG chain: answers in-scope questions, responds with the policy otherwise.

    An in-scope question in the calibration profile's hedge band (``Guard(calibration=DIR)``,
    ``verdict.hedge``) is answered the normal way (the chain, or the guard's LLM) and the guard's
    ``hedge`` policy qualifies it: with :class:`~scopeguard.policies.HedgePolicy` (the default)
    the answer is followed by its caveat line and the action is ``Action.HEDGED``; with
    ``Guard(hedge=None)`` it is answered plainly.

    Input: a question string, or a dict holding it under ``input_key``. Output: a dict with
    ``question``, ``documents`` (what the retriever returned), ``verdict`` (a
    :class:`scopeguard.Verdict`), ``failed_closed``, ``action`` (a :class:`scopeguard.Action`)
    and ``answer`` (the chain's answer, or the policy's response).

    ``chain`` receives ``{"question", "context" (the documents joined by ``format_documents``),
    "documents"}`` and must return a string or a message (for example
    ``rag_prompt() | chat_model | StrOutputParser()``). Without a chain the guard's own LLM
    answers with its ``answer_template``. ``stream``/``astream`` first yield the question,
    documents and verdict, then the chain's chunks as ``{"answer": chunk}`` when in scope, or
    the policy's response in one chunk when not (``policy="flag"`` streams the chain's answer; a
    hedged answer streams, then the caveat comes as a final chunk).

    ``preread(chunks)`` reads the chunks you index (LangChain documents, as the retriever returns
    them) ahead of the questions, ``preread_in_background(chunks)`` on a daemon thread between
    checks (:meth:`scopeguard.Guard.preread`, :meth:`scopeguard.Guard.preread_in_background`).

    ``speculative=True`` starts the answer (the chain, or the guard's LLM) beside the check, on a
    thread (``invoke``/``stream``) or a task (``ainvoke``/``astream``), and holds it (a stream's
    chunks) until the verdict: released where the verdict leads to it (in scope; ``flag`` and the
    ``hedge`` policy use it too), dropped otherwise, a failed check included: the output is then
    exactly the policy's. The speculative chain runs without the caller's callbacks (a dropped
    answer must not show in a trace or ``astream_events``); a ``ScopeGuardSpeculation`` child run
    records its outcome and a dropped one's cost (``scopeguard_discarded_tokens``,
    ``scopeguard_discarded_seconds``). It saves the check's time on answered questions and pays for
    dropped answers' tokens: worth it with an API LLM, not with a local LLM on the guard's CPU.

    Tracing: the retriever, the detection step (``ScopeGuardCheck``) and the chain run as child
    runs. The verdict is also put where tracers filter runs: a ``ScopeGuardVerdict`` child run,
    and the answer chain's (or the policy's ``ScopeGuardPolicy``, or the hedge policy's
    ``ScopeGuardHedge``) run with everything under it, carry ``scopeguard_label``,
    ``scopeguard_score``, ``scopeguard_detector``, ``scopeguard_stage``,
    ``scopeguard_out_of_scope``, ``scopeguard_failed_closed`` and ``scopeguard_hedge`` in their
    metadata and a ``scopeguard:<label>`` tag (and ``scopeguard:hedge`` for a hedged answer).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Runnable[str, list[LCDocument]]
    guard: AnyGuard
    chain: Runnable[dict[str, Any], Any] | None = None
    input_key: str = "question"
    format_documents: Callable[[Sequence[LCDocument]], str] = _join_documents
    speculative: bool = False

    @model_validator(mode="after")
    def _has_answerer(self) -> GuardedRAG:
        if self.chain is None and self.guard.llm is None:
            raise ValueError(
                "GuardedRAG needs chain=... or a Guard with llm=... to answer in-scope questions"
            )
        return self

    @property
    def OutputType(self) -> Any:
        return GuardedOutput

    # -- steps --------------------------------------------------------------------------------
    def _question(self, value: Any) -> str:
        if isinstance(value, str):
            return validate_question(value)
        if isinstance(value, Mapping) and self.input_key in value:
            return validate_question(value[self.input_key])
        raise InputError(
            f"GuardedRAG expects a question string or a dict with the key {self.input_key!r}, "
            f"got {type(value).__name__}"
            + (f" with keys {sorted(map(str, value))}" if isinstance(value, Mapping) else "")
        )

    def _check(self, step: Mapping[str, Any]) -> Verdict:
        docs = to_scopeguard(step["documents"])
        return self.guard.check(step["question"], docs) if docs else no_documents_verdict(self.guard)

    async def _acheck(self, step: Mapping[str, Any]) -> Verdict:
        docs = to_scopeguard(step["documents"])
        return await self.guard.acheck(step["question"], docs) if docs else no_documents_verdict(self.guard)

    def _detector_step(self) -> Runnable[Mapping[str, Any], Verdict]:
        return RunnableLambda(self._check, afunc=self._acheck, name="ScopeGuardCheck")

    def _context(
        self,
        question: str,
        documents: list[LCDocument],
        verdict: Verdict,
        config: RunnableConfig,
        held: Held | None = None,
    ) -> PolicyContext:
        responder = held_responder(held) if held is not None else None
        return PolicyContext(
            question=question,
            documents=tuple(to_scopeguard(documents)),
            verdict=verdict,
            llm=self.guard.llm,
            responder=responder or (lambda q, _docs: self._answer(q, documents, config)),
        )

    def _head(
        self, question: str, documents: list[LCDocument], verdict: Verdict
    ) -> tuple[AddableDict, bool, dict[str, Any]]:
        """The output's head, whether out of scope, and the verdict's trace metadata."""
        oos, closed = self.guard.decide(verdict)
        head = AddableDict(question=question, documents=documents, verdict=verdict, failed_closed=closed)
        return head, oos, verdict_metadata(verdict, out_of_scope=oos, failed_closed=closed)

    def _prepare(
        self, value: Any, config: RunnableConfig, *, stream: bool = False
    ) -> tuple[AddableDict, bool, RunnableConfig, HeldAnswer[str] | None]:
        """Retrieve and detect (the answer started beside the check when ``speculative``): the
        output's head, whether out of scope, the config (verdict metadata and tags added) for the
        steps after detection, and the held answer."""
        question = self._question(value)
        documents = list(self.retriever.invoke(question, config))
        held = self._speculate(question, documents, config, stream)
        try:
            verdict = self._detector_step().invoke({"question": question, "documents": documents}, config)
            head, oos, meta = self._head(question, documents, verdict)
        except BaseException:
            trace_speculation(config.get("callbacks"), settle(held))
            raise
        trace_verdicts(config.get("callbacks"), [meta])
        return head, oos, merge_configs(config, verdict_config(meta)), held

    async def _aprepare(
        self, value: Any, config: RunnableConfig, *, stream: bool = False
    ) -> tuple[AddableDict, bool, RunnableConfig, AsyncHeldAnswer[str] | None]:
        question = self._question(value)
        documents = list(await self.retriever.ainvoke(question, config))
        held = self._aspeculate(question, documents, config, stream)
        try:
            step = self._detector_step()
            verdict = await step.ainvoke({"question": question, "documents": documents}, config)
            head, oos, meta = self._head(question, documents, verdict)
        except BaseException:
            await atrace_speculation(config.get("callbacks"), settle(held))
            raise
        await atrace_verdicts(config.get("callbacks"), [meta])
        return head, oos, merge_configs(config, verdict_config(meta)), held

    def _hedge(self, head: AddableDict, oos: bool) -> Policy | None:
        """The guard's hedge policy for an in-scope verdict in the hedge band, else ``None``."""
        return None if oos else self.guard.hedging(head["verdict"])

    def _streams_answer(self, oos: bool, hedge: Policy | None = None) -> bool:
        """Whether the answer is streamed: in scope (hedged by :class:`HedgePolicy`, whose caveat
        follows as a last chunk), or out of scope under the flag policy."""
        if hedge is not None:
            return isinstance(hedge, HedgePolicy)
        return not oos or isinstance(self.guard.policy, FlagOnlyPolicy)

    def _policy_step(
        self, head: AddableDict, hedge: Policy | None = None, held: Held | None = None
    ) -> Runnable[Any, PolicyOutcome]:
        """The policy (or the ``hedge`` policy) as a traced step; a chain it calls (``flag``,
        ``hedge``) runs as its child (or hands over the ``held`` speculative answer)."""
        policy = self.guard.policy if hedge is None else hedge

        def apply(_: Any, config: RunnableConfig) -> PolicyOutcome:
            ctx = self._context(head["question"], head["documents"], head["verdict"], config, held)
            return policy.apply(ctx)

        async def aapply(_: Any, config: RunnableConfig) -> PolicyOutcome:
            ctx = self._context(head["question"], head["documents"], head["verdict"], config, held)
            return await policy.aapply(ctx)

        return RunnableLambda(
            apply, afunc=aapply, name="ScopeGuardPolicy" if hedge is None else "ScopeGuardHedge"
        )

    def _respond(
        self, head: AddableDict, config: RunnableConfig, hedge: Policy | None = None, held: Held | None = None
    ) -> AddableDict:
        outcome = self._policy_step(head, hedge, held).invoke(head["question"], config)
        return AddableDict(action=outcome.action, answer=outcome.response)

    async def _arespond(
        self, head: AddableDict, config: RunnableConfig, hedge: Policy | None = None, held: Held | None = None
    ) -> AddableDict:
        outcome = await self._policy_step(head, hedge, held).ainvoke(head["question"], config)
        return AddableDict(action=outcome.action, answer=outcome.response)

    @staticmethod
    def _streamed_action(oos: bool, hedge: Policy | None) -> Action:
        return Action.HEDGED if hedge is not None else Action.FLAGGED if oos else Action.ANSWERED

    # -- invoke -------------------------------------------------------------------------------
    def _invoke(
        self, value: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> AddableDict:
        head, oos, config, held = self._prepare(value, config)
        try:
            hedge = self._hedge(head, oos)
            if oos or hedge is not None:
                return head + self._respond(head, config, hedge, held)
            if held is not None:
                return head + AddableDict(action=Action.ANSWERED, answer=held.result())
            answer = self._answer(head["question"], head["documents"], config)
            return head + AddableDict(action=Action.ANSWERED, answer=answer)
        finally:
            trace_speculation(config.get("callbacks"), settle(held))

    async def _ainvoke(
        self, value: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> AddableDict:
        head, oos, config, held = await self._aprepare(value, config)
        try:
            hedge = self._hedge(head, oos)
            if oos or hedge is not None:
                return head + await self._arespond(head, config, hedge, held)
            if held is not None:
                return head + AddableDict(action=Action.ANSWERED, answer=await held.result())
            answer = await self._aanswer(head["question"], head["documents"], config)
            return head + AddableDict(action=Action.ANSWERED, answer=answer)
        finally:
            await atrace_speculation(config.get("callbacks"), settle(held))

    def invoke(self, input: GuardedInput, config: RunnableConfig | None = None, **kwargs: Any) -> AddableDict:
        return self._call_with_config(self._invoke, input, config, run_type="chain")

    async def ainvoke(
        self, input: GuardedInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AddableDict:
        return await self._acall_with_config(self._ainvoke, input, config, run_type="chain")

    # -- streaming ----------------------------------------------------------------------------
    def _transform(
        self, inputs: Iterator[Any], run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Iterator[AddableDict]:
        head, oos, config, held = self._prepare(_combine(list(inputs)), config, stream=True)
        try:
            yield head
            hedge = self._hedge(head, oos)
            if not self._streams_answer(oos, hedge):
                yield self._respond(head, config, hedge)
                return
            yield AddableDict(action=self._streamed_action(oos, hedge))
            question, documents = head["question"], head["documents"]
            texts = held.release() if held is not None else self._stream_texts(question, documents, config)
            if isinstance(hedge, HedgePolicy):
                texts = hedge.caveat_stream(texts)
            for text in texts:
                yield AddableDict(answer=text)
        finally:
            trace_speculation(config.get("callbacks"), settle(held))

    async def _atransform(
        self, inputs: AsyncIterator[Any], run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> AsyncIterator[AddableDict]:
        value = _combine([x async for x in inputs])
        head, oos, config, held = await self._aprepare(value, config, stream=True)
        try:
            yield head
            hedge = self._hedge(head, oos)
            if not self._streams_answer(oos, hedge):
                yield await self._arespond(head, config, hedge)
                return
            yield AddableDict(action=self._streamed_action(oos, hedge))
            question, documents = head["question"], head["documents"]
            texts = held.release() if held is not None else self._astream_texts(question, documents, config)
            if isinstance(hedge, HedgePolicy):
                texts = hedge.acaveat_stream(texts)
            async for text in texts:
                yield AddableDict(answer=text)
        finally:
            await atrace_speculation(config.get("callbacks"), settle(held))

    def stream(
        self, input: GuardedInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[AddableDict]:
        yield from self._transform_stream_with_config(
            iter([input]), self._transform, config, run_type="chain"
        )

    async def astream(
        self, input: GuardedInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[AddableDict]:
        async def one() -> AsyncIterator[GuardedInput]:
            yield input

        async for chunk in self._atransform_stream_with_config(
            one(), self._atransform, config, run_type="chain"
        ):
            yield chunk


def _combine(chunks: list[Any]) -> Any:
    """Input streamed in pieces (``transform``) is added back together."""
    if not chunks:
        raise InputError("GuardedRAG received no input")
    return functools.reduce(operator.add, chunks) if len(chunks) > 1 else chunks[0]
