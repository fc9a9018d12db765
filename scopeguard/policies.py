"""What the guard does with a question once the detector has spoken.

A :class:`Policy` turns (question, documents, verdict) into an :class:`~scopeguard.types.Action`
and a response. Policies are looked up by name (``refuse``, ``clarify``, ``defuse``,
``flag``, ``hedge``) or given as objects; any callable ``(question, documents, verdict) -> str``
is wrapped in :class:`CallablePolicy`.

The guard applies its ``policy`` to out-of-scope questions and its ``hedge`` policy
(:class:`HedgePolicy` by default) to in-scope questions in a calibration profile's hedge band
(:attr:`~scopeguard.types.Verdict.hedge`): answered, with a caveat that the documents may not
fully cover the question.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatModel
from scopeguard.prompts import render, render_documents
from scopeguard.types import Action, Document, Verdict

__all__ = [
    "HEDGE_CAVEAT",
    "CallablePolicy",
    "ClarifyPolicy",
    "DefusePolicy",
    "FlagOnlyPolicy",
    "HedgePolicy",
    "Policy",
    "PolicyContext",
    "PolicyOutcome",
    "RefusePolicy",
    "allm_answer",
    "available_policies",
    "get_policy",
    "llm_answer",
    "with_caveat",
]

Responder = Callable[[str, Sequence[Document]], str]

ANSWER_MAX_TOKENS = 512
"""Reply cap for answers written by the guard's LLM (a RAG answer rarely needs more)."""

HEDGE_CAVEAT = "Note: the retrieved documents may not fully cover this question."
"""The line :class:`HedgePolicy` puts after an answer it did not write itself (a responder's)."""


@dataclass(frozen=True)
class PolicyContext:
    question: str
    documents: Sequence[Document]
    verdict: Verdict
    llm: ChatModel | None = None
    responder: Responder | None = None
    """How the pipeline normally answers (used by ``flag`` and ``hedge``); defaults to the LLM
    with RAG Basic (``hedge``: with its own template)."""


@dataclass(frozen=True)
class PolicyOutcome:
    action: Action
    response: str


def _answer_prompt(
    llm: ChatModel | None, question: str, documents: Sequence[Document], template: str
) -> tuple[ChatModel, str]:
    """The LLM (an error when there is none) and the rendered RAG prompt of an answer."""
    if llm is None:
        raise ConfigurationError(
            "this step needs an LLM to answer: pass llm=... (a ChatModel or a spec string)"
        )
    return llm, render(template, document=render_documents(documents), question=question)


def llm_answer(
    llm: ChatModel | None,
    question: str,
    documents: Sequence[Document],
    template: str = "rag_basic",
    *,
    max_tokens: int | None = ANSWER_MAX_TOKENS,
) -> str:
    """Answer ``question`` from ``documents`` with one of the RAG prompt templates."""
    model, prompt = _answer_prompt(llm, question, documents, template)
    return model.complete(prompt, temperature=0.0, max_tokens=max_tokens).text.strip()


async def allm_answer(
    llm: ChatModel | None,
    question: str,
    documents: Sequence[Document],
    template: str = "rag_basic",
    *,
    max_tokens: int | None = ANSWER_MAX_TOKENS,
) -> str:
    """Async twin of :func:`llm_answer` (``llm.acomplete``)."""
    model, prompt = _answer_prompt(llm, question, documents, template)
    return (await model.acomplete(prompt, temperature=0.0, max_tokens=max_tokens)).text.strip()


@runtime_checkable
class Policy(Protocol):
    name: str

    def apply(self, ctx: PolicyContext) -> PolicyOutcome: ...

    async def aapply(self, ctx: PolicyContext) -> PolicyOutcome: ...


class _SyncPolicy:
    name = "policy"

    def apply(self, ctx: PolicyContext) -> PolicyOutcome:
        raise NotImplementedError

    async def aapply(self, ctx: PolicyContext) -> PolicyOutcome:
        return self.apply(ctx)


class RefusePolicy(_SyncPolicy):
    """Refuse with a fixed message (template ``refuse`` unless ``message`` is given)."""

    name = "refuse"

    def __init__(self, *, message: str | None = None) -> None:
        self.message = message

    def apply(self, ctx: PolicyContext) -> PolicyOutcome:
        return PolicyOutcome(Action.REFUSED, self.message or render("refuse"))


class ClarifyPolicy(_SyncPolicy):
    """Say what the documents do not cover, from ``verdict.uncovered`` when the detector knows."""

    name = "clarify"

    def __init__(self, *, include_rationale: bool = False) -> None:
        self.include_rationale = include_rationale

    def apply(self, ctx: PolicyContext) -> PolicyOutcome:
        text = render(
            "clarify",
            uncovered=list(ctx.verdict.uncovered),
            rationale=ctx.verdict.rationale if self.include_rationale else "",
        )
        return PolicyOutcome(Action.CLARIFIED, text)


class DefusePolicy:
    """Re-ask the answering LLM with the Zero-shot-CoT prompt (ELOQ appendix B.8)."""

    name = "defuse"

    def __init__(self, *, template: str = "rag_zero_shot_cot") -> None:
        self.template = template

    def apply(self, ctx: PolicyContext) -> PolicyOutcome:
        return PolicyOutcome(Action.DEFUSED, llm_answer(ctx.llm, ctx.question, ctx.documents, self.template))

    async def aapply(self, ctx: PolicyContext) -> PolicyOutcome:
        return PolicyOutcome(
            Action.DEFUSED, await allm_answer(ctx.llm, ctx.question, ctx.documents, self.template)
        )


class FlagOnlyPolicy:
    """Answer as usual; the verdict rides along in the result."""

    name = "flag"

    def apply(self, ctx: PolicyContext) -> PolicyOutcome:
        if ctx.responder is not None:
            return PolicyOutcome(Action.FLAGGED, ctx.responder(ctx.question, ctx.documents))
        return PolicyOutcome(Action.FLAGGED, llm_answer(ctx.llm, ctx.question, ctx.documents))

    async def aapply(self, ctx: PolicyContext) -> PolicyOutcome:
        if ctx.responder is not None:
            return PolicyOutcome(
                Action.FLAGGED, await asyncio.to_thread(ctx.responder, ctx.question, ctx.documents)
            )
        return PolicyOutcome(Action.FLAGGED, await allm_answer(ctx.llm, ctx.question, ctx.documents))


def with_caveat(text: str, caveat: str = HEDGE_CAVEAT) -> str:
    """``text`` followed by ``caveat`` on a line of its own.

    An empty ``text`` stays empty: there is no answer to qualify (a server that leaves the answer
    to its caller returns none; the caller adds the caveat to its own answer).
    """
    body = text.rstrip()
    return f"{body}\n\n{caveat}" if body else text


class HedgePolicy:
    """Answer from the documents with a caveat that they may not fully cover the question.

    For in-scope verdicts in a calibration profile's hedge band (``verdict.hedge``). With a
    ``responder`` (the user's own RAG chain) the answer is the responder's text followed by
    ``caveat`` (:func:`with_caveat`); otherwise the LLM answers with ``template`` (``rag_hedged``:
    answer only from the documents and say plainly which part they do not cover, if any).
    The action is :attr:`~scopeguard.types.Action.HEDGED`.
    """

    name = "hedge"

    def __init__(self, *, template: str = "rag_hedged", caveat: str = HEDGE_CAVEAT) -> None:
        self.template = template
        self.caveat = caveat

    def apply(self, ctx: PolicyContext) -> PolicyOutcome:
        if ctx.responder is not None:
            return PolicyOutcome(
                Action.HEDGED, with_caveat(ctx.responder(ctx.question, ctx.documents), self.caveat)
            )
        return PolicyOutcome(Action.HEDGED, llm_answer(ctx.llm, ctx.question, ctx.documents, self.template))

    async def aapply(self, ctx: PolicyContext) -> PolicyOutcome:
        if ctx.responder is not None:
            text = await asyncio.to_thread(ctx.responder, ctx.question, ctx.documents)
            return PolicyOutcome(Action.HEDGED, with_caveat(text, self.caveat))
        return PolicyOutcome(
            Action.HEDGED, await allm_answer(ctx.llm, ctx.question, ctx.documents, self.template)
        )

    def caveat_stream(self, chunks: Iterable[str]) -> Iterator[str]:
        """A streamed answer's chunks, then the caveat as a final chunk: joined, the same text as
        :func:`with_caveat` of the whole answer (trailing whitespace is held back for that)."""
        tail = _CaveatTail(self.caveat)
        for chunk in chunks:
            yield from tail.feed(chunk)
        yield from tail.close()

    async def acaveat_stream(self, chunks: AsyncIterable[str]) -> AsyncIterator[str]:
        """The async twin of :meth:`caveat_stream`."""
        tail = _CaveatTail(self.caveat)
        async for chunk in chunks:
            for out in tail.feed(chunk):
                yield out
        for out in tail.close():
            yield out


class _CaveatTail:
    """The chunks to send for each chunk of a streamed answer, then for its end (no I/O here, so
    the sync and async streams share it): trailing whitespace is held back until more text
    follows; at the end the caveat replaces it, as :func:`with_caveat` does."""

    def __init__(self, caveat: str) -> None:
        self.caveat = caveat
        self.held = ""
        self.answered = False

    def feed(self, chunk: str) -> list[str]:
        body = chunk.rstrip()
        if not body:
            self.held += chunk
            return []
        out = self.held + body
        self.held, self.answered = chunk[len(body) :], True
        return [out]

    def close(self) -> list[str]:
        if self.answered:
            return [f"\n\n{self.caveat}"]
        return [self.held] if self.held else []  # no answer: nothing to qualify (as with_caveat)


class CallablePolicy(_SyncPolicy):
    """Wrap ``fn(question, documents, verdict) -> str`` as a policy."""

    name = "callable"

    def __init__(self, fn: Callable[[str, Sequence[Document], Verdict], str]) -> None:
        self.fn = fn

    def apply(self, ctx: PolicyContext) -> PolicyOutcome:
        return PolicyOutcome(Action.CUSTOM, self.fn(ctx.question, ctx.documents, ctx.verdict))


_POLICIES: dict[str, Callable[[], Policy]] = {
    "refuse": RefusePolicy,
    "clarify": ClarifyPolicy,
    "defuse": DefusePolicy,
    "flag": FlagOnlyPolicy,
    "hedge": HedgePolicy,
}


def available_policies() -> list[str]:
    return sorted(_POLICIES)


def get_policy(policy: str | Policy | Callable[[str, Sequence[Document], Verdict], str]) -> Policy:
    """A policy by name, a policy object, or a callable wrapped in :class:`CallablePolicy`."""
    if isinstance(policy, str):
        try:
            return _POLICIES[policy]()
        except KeyError:
            raise ConfigurationError(
                f"unknown policy {policy!r}; valid names: {', '.join(available_policies())}"
            ) from None
    if isinstance(policy, Policy):
        return policy
    if callable(policy):
        return CallablePolicy(policy)
    raise ConfigurationError(f"policy must be a name, a Policy or a callable, got {type(policy).__name__}")
