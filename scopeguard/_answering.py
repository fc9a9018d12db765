"""The step after the verdict: :class:`Answering`, a base of ``Guard``.

What follows a verdict (:meth:`~Answering._plan`: a refusal, the policy, the hedge policy or the
plain answer), that step run (:meth:`~Answering._respond`, awaited in
:meth:`~Answering._arespond`; the held answer when one was started beside the check by
:meth:`~Answering._held`), and a failed step turned into a refusal
(:meth:`~Answering._failed_step`). ``Guard.answer`` / ``Guard.aanswer`` run them in that order
after the check; the decision path itself (check, plan, answer, answer check) stays in
:mod:`scopeguard.guard`, these steps live here so that the guard module holds its public surface
and that path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from scopeguard._speculation import AsyncHeldAnswer, Held, HeldAnswer, held_responder
from scopeguard.errors import ConfigurationError, ScopeGuardError, error_kind
from scopeguard.llm.base import ChatModel
from scopeguard.policies import (
    Policy,
    PolicyContext,
    PolicyOutcome,
    RefusePolicy,
    Responder,
    allm_answer,
    llm_answer,
)
from scopeguard.types import Action, Document, GuardResult, Verdict

__all__ = ["Answering"]

logger = logging.getLogger("scopeguard.guard")

H = TypeVar("H", bound=Held)


class Answering:
    """The answering step of a guard, after its verdict (see the module docstring)."""

    if TYPE_CHECKING:
        llm: ChatModel | None
        policy: Policy
        answer_template: str
        on_error: str
        speculative: bool

        def decide(self, verdict: Verdict) -> tuple[bool, bool]: ...

        def hedging(self, verdict: Verdict) -> Policy | None: ...

    def _plan(
        self, q: str, docs: tuple[Document, ...], verdict: Verdict
    ) -> tuple[GuardResult, str, Policy | None]:
        """What follows ``verdict``: the result before answering (a refusal, ``failed_closed`` as
        :meth:`decide` says), the step that answers it (its ``error_stage`` when it fails) and that
        step's policy (``None``: the plain answer)."""
        oos, closed = self.decide(verdict)
        result = GuardResult(
            question=q, verdict=verdict, action=Action.REFUSED, documents=docs, failed_closed=closed
        )
        if oos:
            return result, "policy", self.policy
        hedge = self.hedging(verdict)
        return result, "answer" if hedge is None else "hedge", hedge

    def _context(self, result: GuardResult, responder: Responder | None, held: Held | None) -> PolicyContext:
        """What the policy answering ``result`` gets; with a held answer, the policies that call the
        ``responder`` get the held answer instead."""
        if held is not None and responder is not None:
            responder = held_responder(held)
        return PolicyContext(result.question, result.documents, result.verdict, self.llm, responder)

    def _failed_step(self, exc: ScopeGuardError, stage: str, result: GuardResult) -> GuardResult:
        """``result`` turned into a refusal after the ``stage`` step failed (or ``exc`` re-raised)."""
        if self.on_error == "raise" or isinstance(exc, ConfigurationError):
            raise exc
        logger.warning("the %s step failed, refusing: %s", stage, exc)
        refuse = self.policy if isinstance(self.policy, RefusePolicy) else RefusePolicy()
        outcome = refuse.apply(PolicyContext(result.question, result.documents, result.verdict))
        return result.model_copy(
            update={
                "action": outcome.action,
                "response": outcome.response,
                "failed_closed": True,
                "metadata": {
                    **result.metadata,
                    "error": str(exc),
                    "error_kind": error_kind(exc),
                    "error_stage": stage,
                },
            }
        )

    def _respond(
        self,
        result: GuardResult,
        policy: Policy | None,
        responder: Responder | None,
        held: HeldAnswer[str] | None,
    ) -> PolicyOutcome:
        """The outcome of the step :meth:`_plan` chose for ``result``: ``policy``'s, or the answer
        (the held one, the ``responder``'s or the guard's LLM's)."""
        if policy is not None:
            return policy.apply(self._context(result, responder, held))
        if held is not None:
            return PolicyOutcome(Action.ANSWERED, held.result())
        q, docs = result.question, result.documents
        text = responder(q, docs) if responder else llm_answer(self.llm, q, docs, self.answer_template)
        return PolicyOutcome(Action.ANSWERED, text)

    async def _arespond(
        self,
        result: GuardResult,
        policy: Policy | None,
        responder: Responder | None,
        held: AsyncHeldAnswer[str] | None,
    ) -> PolicyOutcome:
        """:meth:`_respond`, awaited (a ``responder`` on a worker thread)."""
        if policy is not None:
            return await policy.aapply(self._context(result, responder, held))
        if held is not None:
            return PolicyOutcome(Action.ANSWERED, await held.result())
        q, docs = result.question, result.documents
        if responder is not None:
            return PolicyOutcome(Action.ANSWERED, await asyncio.to_thread(responder, q, docs))
        return PolicyOutcome(Action.ANSWERED, await allm_answer(self.llm, q, docs, self.answer_template))

    def _held(
        self,
        start: Callable[[ChatModel | None, str, str, Sequence[Document], Responder | None], H],
        q: str,
        docs: Sequence[Document],
        responder: Responder | None,
        speculative: bool | None,
    ) -> H | None:
        """The answer started beside the check by ``start``
        (:func:`~scopeguard._speculation.start_answer` on a thread,
        :func:`~scopeguard._speculation.astart_answer` as a task) when speculating and there is
        something to answer with (a ``responder`` or the guard's LLM); ``None`` otherwise."""
        wanted = self.speculative if speculative is None else speculative
        if not wanted or (responder is None and self.llm is None):
            return None
        return start(self.llm, self.answer_template, q, docs, responder)
