"""What the guard does with a question once the detector has spoken.

A :class:`Policy` turns (question, documents, verdict) into an :class:`~scopeguard.types.Action`
and a response. Policies are looked up by name (``refuse``, ``clarify``, ``defuse``,
``flag``) or given as objects; any callable ``(question, documents, verdict) -> str`` is
wrapped in :class:`CallablePolicy`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatModel
from scopeguard.prompts import render, render_documents
from scopeguard.types import Action, Document, Verdict

__all__ = [
    "CallablePolicy",
    "ClarifyPolicy",
    "DefusePolicy",
    "FlagOnlyPolicy",
    "Policy",
    "PolicyContext",
    "PolicyOutcome",
    "RefusePolicy",
    "allm_answer",
    "available_policies",
    "get_policy",
    "llm_answer",
]

Responder = Callable[[str, Sequence[Document]], str]

ANSWER_MAX_TOKENS = 512
"""Reply cap for answers written by the guard's LLM (a RAG answer rarely needs more)."""


@dataclass(frozen=True)
class PolicyContext:
    question: str
    documents: Sequence[Document]
    verdict: Verdict
    llm: ChatModel | None = None
    responder: Responder | None = None
    """How the pipeline normally answers (used by ``flag``); defaults to the LLM with RAG Basic."""


@dataclass(frozen=True)
class PolicyOutcome:
    action: Action
    response: str


def llm_answer(
    llm: ChatModel | None,
    question: str,
    documents: Sequence[Document],
    template: str = "rag_basic",
    *,
    max_tokens: int | None = ANSWER_MAX_TOKENS,
) -> str:
    """Answer ``question`` from ``documents`` with one of the RAG prompt templates."""
    if llm is None:
        raise ConfigurationError(
            "this step needs an LLM to answer: pass llm=... (a ChatModel or a spec string)"
        )
    prompt = render(template, document=render_documents(documents), question=question)
    return llm.complete(prompt, temperature=0.0, max_tokens=max_tokens).text.strip()


async def allm_answer(
    llm: ChatModel | None,
    question: str,
    documents: Sequence[Document],
    template: str = "rag_basic",
    *,
    max_tokens: int | None = ANSWER_MAX_TOKENS,
) -> str:
    if llm is None:
        raise ConfigurationError(
            "this step needs an LLM to answer: pass llm=... (a ChatModel or a spec string)"
        )
    prompt = render(template, document=render_documents(documents), question=question)
    return (await llm.acomplete(prompt, temperature=0.0, max_tokens=max_tokens)).text.strip()


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
