"""Guard: detector -> verdict -> policy -> GuardResult.

>>> guard = Guard(detector="default", policy="clarify", llm="local")
>>> result = guard.answer("Who won?", ["...retrieved text..."])
>>> result.action, result.response

When the detector fails (endpoint down, unparseable reply, any
:class:`~scopeguard.errors.ScopeGuardError`) or returns ``unknown``, ``on_error`` decides:
``"fail_closed"`` (default) treats the question as out of scope and marks the result
``failed_closed=True``; ``"fail_open"`` answers; ``"raise"`` re-raises.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol, runtime_checkable

from scopeguard.detectors.base import Detector
from scopeguard.detectors.registry import get_detector
from scopeguard.errors import ConfigurationError, ScopeGuardError
from scopeguard.llm.base import ChatModel
from scopeguard.llm.registry import from_spec
from scopeguard.policies import Policy, PolicyContext, Responder, allm_answer, get_policy, llm_answer
from scopeguard.types import Action, Document, GuardResult, Verdict, as_documents, validate_question

__all__ = ["AnswerCheck", "Guard", "OnError"]

logger = logging.getLogger(__name__)

OnError = Literal["fail_closed", "fail_open", "raise"]
Docs = str | Document | Iterable[str | Document]


@runtime_checkable
class AnswerCheck(Protocol):
    """A check run on the answer after generation (for example answer verification against a
    corpus: :class:`scopeguard.verification.VerifyAnswers`). It returns the result, possibly
    flagged or with the response replaced, and records what it found in ``result.metadata``."""

    def check(self, result: GuardResult) -> GuardResult: ...

    async def acheck(self, result: GuardResult) -> GuardResult: ...


class Guard:
    """Guards a RAG step: decide in/out of scope, then answer or apply the policy.

    Args:
        detector: a detector name from the registry (``"default"``, ``"fast"``, ``"judge"``,
            ...) or a :class:`~scopeguard.detectors.Detector`.
        policy: ``"refuse"``, ``"clarify"``, ``"defuse"``, ``"flag"``, a Policy, or a callable
            ``(question, documents, verdict) -> str``.
        llm: the answering LLM (a ChatModel or a spec string such as ``"local"``); needed by
            :meth:`answer` unless a ``responder`` is given, and by the ``defuse`` policy.
        answer_template: the RAG prompt used to answer in-scope questions.
        on_error: what a detector failure or an ``unknown`` verdict leads to.
        concurrency: the bound for :meth:`batch` / :meth:`abatch`.
        answer_check: an optional :class:`AnswerCheck` run on every result after generation.
    """

    def __init__(
        self,
        *,
        detector: str | Detector = "default",
        policy: str | Policy | Callable[[str, Sequence[Document], Verdict], str] = "clarify",
        llm: str | ChatModel | None = None,
        answer_template: str = "rag_basic",
        on_error: OnError = "fail_closed",
        concurrency: int = 4,
        answer_check: AnswerCheck | None = None,
    ) -> None:
        if on_error not in ("fail_closed", "fail_open", "raise"):
            raise ConfigurationError(
                f"on_error must be 'fail_closed', 'fail_open' or 'raise', got {on_error!r}"
            )
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be >= 1, got {concurrency}")
        self.detector: Detector = get_detector(detector)
        self.policy: Policy = get_policy(policy)
        self.llm: ChatModel | None = from_spec(llm) if llm is not None else None
        self.answer_template = answer_template
        self.on_error: OnError = on_error
        self.concurrency = concurrency
        self.answer_check = answer_check

    # -- detection -------------------------------------------------------------------------
    def _on_failure(self, exc: ScopeGuardError) -> Verdict:
        if self.on_error == "raise":
            raise exc
        logger.warning("detector %s failed: %s", getattr(self.detector, "name", "?"), exc)
        return Verdict(label="unknown", detector=getattr(self.detector, "name", ""), error=str(exc))

    def check(self, question: str, documents: Docs) -> Verdict:
        """The detector's verdict; failures follow ``on_error`` (an ``unknown`` verdict with ``error``)."""
        q, docs = validate_question(question), as_documents(documents)
        try:
            return self.detector.detect(q, docs)
        except ScopeGuardError as exc:
            return self._on_failure(exc)

    async def acheck(self, question: str, documents: Docs) -> Verdict:
        q, docs = validate_question(question), as_documents(documents)
        try:
            return await self.detector.adetect(q, docs)
        except ScopeGuardError as exc:
            return self._on_failure(exc)

    def decide(self, verdict: Verdict) -> tuple[bool, bool]:
        """``(out_of_scope, failed_closed)`` for ``verdict`` under ``on_error``.

        An ``unknown`` verdict (a failed detector) counts as out of scope with ``fail_closed``,
        as in scope with ``fail_open``, and raises :class:`ScopeGuardError` with ``raise``.
        Integrations that run their own answering step use this to stay consistent with the guard.
        """
        if verdict.label == "unknown":
            if self.on_error == "raise":
                raise ScopeGuardError(f"detector returned no verdict: {verdict.error or verdict.rationale}")
            closed = self.on_error == "fail_closed"
            return closed, closed
        return verdict.label == "out_of_scope", False

    # -- answering -------------------------------------------------------------------------
    def answer(self, question: str, documents: Docs, *, responder: Responder | None = None) -> GuardResult:
        """Check, then answer (in scope) or apply the policy (out of scope).

        ``responder(question, documents) -> str`` replaces the guard's own LLM for in-scope
        answers (for example a user's RAG chain).
        """
        q, docs = validate_question(question), as_documents(documents)
        verdict = self.check(q, docs)
        oos, closed = self.decide(verdict)
        if oos:
            outcome = self.policy.apply(PolicyContext(q, docs, verdict, self.llm, responder))
            action, response = outcome.action, outcome.response
        else:
            action = Action.ANSWERED
            response = (
                responder(q, docs) if responder else llm_answer(self.llm, q, docs, self.answer_template)
            )
        result = GuardResult(
            question=q,
            verdict=verdict,
            action=action,
            response=response,
            documents=docs,
            failed_closed=closed,
        )
        return self.answer_check.check(result) if self.answer_check is not None else result

    async def aanswer(
        self, question: str, documents: Docs, *, responder: Responder | None = None
    ) -> GuardResult:
        q, docs = validate_question(question), as_documents(documents)
        verdict = await self.acheck(q, docs)
        oos, closed = self.decide(verdict)
        if oos:
            outcome = await self.policy.aapply(PolicyContext(q, docs, verdict, self.llm, responder))
            action, response = outcome.action, outcome.response
        else:
            action = Action.ANSWERED
            if responder is not None:
                response = await asyncio.to_thread(responder, q, docs)
            else:
                response = await allm_answer(self.llm, q, docs, self.answer_template)
        result = GuardResult(
            question=q,
            verdict=verdict,
            action=action,
            response=response,
            documents=docs,
            failed_closed=closed,
        )
        return await self.answer_check.acheck(result) if self.answer_check is not None else result

    # -- batches ---------------------------------------------------------------------------
    async def abatch(
        self, items: Iterable[tuple[str, Docs]], *, answer: bool = True, concurrency: int | None = None
    ) -> list[GuardResult | Verdict]:
        """Run many (question, documents) pairs concurrently, at most ``concurrency`` at once."""
        sem = asyncio.Semaphore(concurrency or self.concurrency)

        async def one(q: str, d: Docs) -> GuardResult | Verdict:
            async with sem:
                return await (self.aanswer(q, d) if answer else self.acheck(q, d))

        return list(await asyncio.gather(*(one(q, d) for q, d in items)))

    def batch(
        self, items: Iterable[tuple[str, Docs]], *, answer: bool = True, concurrency: int | None = None
    ) -> list[GuardResult | Verdict]:
        """Sync wrapper of :meth:`abatch` (must not be called from a running event loop)."""
        return asyncio.run(self.abatch(items, answer=answer, concurrency=concurrency))
