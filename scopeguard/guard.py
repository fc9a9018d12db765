"""Guard: detector -> verdict -> policy -> GuardResult.

>>> guard = Guard(detector="default", policy="clarify", llm="local")
>>> result = guard.answer("Who won?", ["...retrieved text..."])
>>> result.action, result.response

An in-scope verdict is answered; one in a calibration profile's hedge band
(``Guard(calibration=DIR)``, :attr:`~scopeguard.types.Verdict.hedge`) goes to the ``hedge``
policy (answered with a caveat that the documents may not fully cover the question, action
``hedged``); an out-of-scope verdict goes to the ``policy``.

When the detector fails (endpoint down, malformed or unparseable reply, deadline exceeded: any
:class:`~scopeguard.errors.ScopeGuardError`) or returns ``unknown``, ``on_error`` decides:
``"fail_closed"`` (default) treats the question as out of scope and marks the result
``failed_closed=True``; ``"fail_open"`` answers; ``"raise"`` re-raises.

When the answering step fails (the answering LLM, the policy's or the hedge policy's LLM or the
``answer_check`` raises a ScopeGuardError other than a ConfigurationError) the result is a refusal
with ``failed_closed=True`` and the error in ``result.metadata["error"]`` (the step in
``metadata["error_stage"]``: ``answer``, ``hedge``, ``policy``, ``answer_check``), unless
``on_error="raise"``. A batch never loses its other results to one failing item.

``Guard(speculative=True)`` (or ``answer(..., speculative=True)``) starts the answer (the
``responder``, or the guard's LLM) beside the check, on a thread (``answer``) or a task
(``aanswer``), and holds it until the verdict: the answer is released where the verdict leads to
it (in scope; the ``flag`` and ``hedge`` policies with a ``responder`` use it too), and dropped
otherwise (out of scope, a failed check: the policy's result, exactly as without speculation).
``result.metadata["speculation"]`` says which, with a dropped answer's cost (seconds, tokens).

``guard.preread(documents)`` reads a corpus ahead of the questions (``preread_in_background``:
on a daemon thread, between checks), so that a later check costs only the question.

A guard sits in a request path, so each :meth:`~Guard.check` / :meth:`~Guard.answer` is bounded
by default: :data:`DEFAULT_DEADLINE_S` (120 s) for the whole call, every LLM request, retry and
wait included; past it the step fails closed like any other failure. ``Guard(deadline=30)``
tightens it, ``Guard(deadline=None)`` removes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from scopeguard._answering import Answering
from scopeguard._batching import Batching, failed_verdict
from scopeguard._prereading import CheckGate, Prereading
from scopeguard._speculation import (
    AsyncHeldAnswer,
    HeldAnswer,
    asettled,
    astart_answer,
    settled,
    start_answer,
)
from scopeguard.detection.detectors.base import Detector
from scopeguard.detection.detectors.registry import detector_takes, get_detector
from scopeguard.detection.profile import CalibrationProfile, calibrated
from scopeguard.errors import ConfigurationError, LLMTimeoutError, ScopeGuardError
from scopeguard.llm.base import ChatModel
from scopeguard.llm.deadline import current as current_budget
from scopeguard.llm.deadline import deadline as deadline_block
from scopeguard.llm.deadline import validate_seconds
from scopeguard.llm.registry import from_spec
from scopeguard.policies import Policy, PolicyOutcome, Responder, get_policy
from scopeguard.types import Document, GuardResult, Verdict, as_documents, validate_question

__all__ = ["DEFAULT_DEADLINE_S", "AnswerCheck", "Guard", "OnError"]

logger = logging.getLogger(__name__)

OnError = Literal["fail_closed", "fail_open", "raise"]
Docs = str | Document | Iterable[str | Document]
T = TypeVar("T")
_GRACE_S = 1.0  # the async hard stop comes this long after the deadline, behind the backends' own
#: the deadline of one check or answer when ``Guard(deadline=...)`` is not given (seconds)
DEFAULT_DEADLINE_S = 120.0


def _check_on_error(on_error: str) -> None:
    """Raise :class:`ConfigurationError` unless ``on_error`` is one of :data:`OnError`'s values."""
    if on_error not in ("fail_closed", "fail_open", "raise"):
        raise ConfigurationError(f"on_error must be 'fail_closed', 'fail_open' or 'raise', got {on_error!r}")


@runtime_checkable
class AnswerCheck(Protocol):
    """A check run on the answer after generation (for example answer verification against a
    corpus: :class:`scopeguard.verification.VerifyAnswers`). It returns the result, possibly
    flagged or with the response replaced, and records what it found in ``result.metadata``."""

    def check(self, result: GuardResult) -> GuardResult: ...

    async def acheck(self, result: GuardResult) -> GuardResult: ...


class Guard(Answering, Batching, Prereading):
    """Guards a RAG step: decide in/out of scope, then answer or apply the policy.

    Args:
        detector: a detector name from the registry (``"default"``, ``"fast"``, ``"judge"``,
            ...) or a :class:`~scopeguard.detection.detectors.Detector`. A detector built by name whose
            factory takes an ``llm`` keyword (``"judge"``, ...) gets the guard's ``llm``; pass a
            detector instance to give it another LLM.
        reader: the reading model of a detector built by name that reads (its registry entry says
            so: ``"default"``, ``"logprob"``; :func:`~scopeguard.detection.detectors.detector_reads`):
            a spec such as ``"local"``, ``"local:FOLDER"`` (a GGUF or a tuned reader) or
            ``"openai:MODEL"``, or a verdict scorer. ``None``: the model its head was fitted on.
            Another detector, or a detector instance, raises
            :class:`~scopeguard.errors.ConfigurationError`. The guard's ``llm`` is never read with.
        policy: what out-of-scope questions get: ``"refuse"``, ``"clarify"``, ``"defuse"``,
            ``"flag"``, a Policy, or a callable ``(question, documents, verdict) -> str``.
        llm: the guard's LLM: a spec string such as ``"local"`` or ``"openai:gpt-4o-mini"``, a
            scopeguard ChatModel, a LangChain chat model (with ``langchain-scopeguard``) or a
            LlamaIndex LLM (with ``llama-index-scopeguard``), wrapped by
            :func:`~scopeguard.llm.registry.from_spec`. It answers in-scope questions (unless a
            ``responder`` is given), serves the ``defuse`` and ``hedge`` policies and judges for a
            detector built by name (never a reading model: that is ``reader``).
        answer_template: the RAG prompt used to answer in-scope questions.
        on_error: what a detector failure or an ``unknown`` verdict leads to (a failed answering
            step always fails closed, except with ``"raise"``).
        concurrency: the bound for :meth:`batch` / :meth:`abatch`.
        answer_check: an optional :class:`AnswerCheck` run on every result after generation.
        deadline: seconds for one :meth:`check` / :meth:`answer` (per item in a batch): every LLM
            call, retry and wait inside shares it (see :mod:`scopeguard.llm.deadline`); when it
            runs out the step fails with :class:`~scopeguard.errors.LLMTimeoutError`, which
            ``on_error`` handles like any failure. ``"default"``: :data:`DEFAULT_DEADLINE_S`
            (120 s, read when the guard is built); ``None``: no deadline.
        calibration: a calibration profile (``scopeguard calibrate``'s folder, its
            ``profile.json`` or a :class:`~scopeguard.detection.profile.CalibrationProfile`): its
            threshold labels the detector's verdicts, and its hedge band marks some in-scope
            verdicts ``hedge=True`` (see ``hedge``). ``None``: the detector's own threshold.
        hedge: what in-scope questions in the calibration profile's hedge band get (verdicts with
            ``hedge=True``): ``"hedge"`` (:class:`~scopeguard.policies.HedgePolicy`: the answer
            with a caveat that the documents may not fully cover the question; with a
            ``responder``, its answer followed by :data:`~scopeguard.policies.HEDGE_CAVEAT`),
            another policy name, a Policy or a callable; ``None`` answers them plainly.
        speculative: start the answer beside the check and hold it until the verdict (see the
            module docstring): the answer's latency loses the check's, and a dropped answer's
            tokens are paid for. Worth it with an API LLM; not with a local LLM on the CPU the
            check reads on (they compete for its cores). ``answer(..., speculative=)`` overrides it.
    """

    def __init__(
        self,
        *,
        detector: str | Detector = "default",
        policy: str | Policy | Callable[[str, Sequence[Document], Verdict], str] = "clarify",
        llm: str | ChatModel | Any | None = None,
        reader: str | Any | None = None,
        answer_template: str = "rag_basic",
        on_error: OnError = "fail_closed",
        concurrency: int = 4,
        answer_check: AnswerCheck | None = None,
        deadline: float | Literal["default"] | None = "default",
        calibration: str | os.PathLike[str] | CalibrationProfile | None = None,
        hedge: str | Policy | Callable[[str, Sequence[Document], Verdict], str] | None = "hedge",
        speculative: bool = False,
    ) -> None:
        _check_on_error(on_error)
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be >= 1, got {concurrency}")
        self.deadline = DEFAULT_DEADLINE_S if deadline == "default" else validate_seconds(deadline)
        self.llm: ChatModel | None = from_spec(llm) if llm is not None else None
        self.detector: Detector = calibrated(self._build_detector(detector, reader), calibration)
        #: the calibration profile the detector's verdicts are labelled by (``None``: its own threshold)
        self.calibration: CalibrationProfile | None = getattr(self.detector, "profile", None)
        self.policy: Policy = get_policy(policy)
        #: the policy for in-scope verdicts in the hedge band (``None``: answered plainly)
        self.hedge: Policy | None = None if hedge is None else get_policy(hedge)
        self.answer_template = answer_template
        self.on_error: OnError = on_error
        self.concurrency = concurrency
        self.answer_check = answer_check
        #: whether :meth:`answer` starts the answer beside the check (see the module docstring)
        self.speculative = speculative
        #: the checks running now: a background pre-read reads its next document only when none is
        self.gate = CheckGate()

    def _build_detector(self, detector: str | Detector, reader: Any) -> Detector:
        """The detector; one built by name gets the guard's LLM when its factory takes ``llm``, and
        ``reader`` (the registry refuses it for a detector that does not read)."""
        options: dict[str, Any] = {} if reader is None else {"reader": reader}
        if isinstance(detector, str) and self.llm is not None and detector_takes(detector, "llm"):
            options["llm"] = self.llm
        return get_detector(detector, **options)

    # -- detection -------------------------------------------------------------------------
    def _on_failure(self, exc: ScopeGuardError) -> Verdict:
        if self.on_error == "raise":
            raise exc
        logger.warning("detector %s failed: %s", getattr(self.detector, "name", "?"), exc)
        return failed_verdict(self.detector, exc)

    def check(self, question: str, documents: Docs) -> Verdict:
        """The detector's verdict; failures follow ``on_error`` (an ``unknown`` verdict with ``error``)."""
        q, docs = validate_question(question), as_documents(documents)
        with deadline_block(self.deadline):
            return self._check(q, docs)

    def _check(self, q: str, docs: Sequence[Document]) -> Verdict:
        try:
            with self.gate.checking():
                return self.detector.detect(q, docs)
        except ScopeGuardError as exc:
            return self._on_failure(exc)

    async def acheck(self, question: str, documents: Docs) -> Verdict:
        """:meth:`check`, awaited (the detector's ``adetect``, cut off shortly after the deadline)."""
        q, docs = validate_question(question), as_documents(documents)
        with deadline_block(self.deadline):
            return await self._acheck(q, docs)

    async def _acheck(self, q: str, docs: Sequence[Document]) -> Verdict:
        try:
            with self.gate.checking():
                return await _bounded(self.detector.adetect(q, docs), "the detector")
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

    def hedging(self, verdict: Verdict) -> Policy | None:
        """The policy that answers ``verdict`` with a caveat: the ``hedge`` policy for an in-scope
        verdict in the hedge band, ``None`` for any other verdict (or with ``hedge=None``)."""
        return self.hedge if verdict.hedge and verdict.label == "in_scope" else None

    # -- answering -------------------------------------------------------------------------
    def answer(
        self,
        question: str,
        documents: Docs,
        *,
        responder: Responder | None = None,
        speculative: bool | None = None,
    ) -> GuardResult:
        """Check, then answer (in scope), answer with a caveat (the hedge policy, for an in-scope
        verdict in the hedge band) or apply the policy (out of scope).

        ``responder(question, documents) -> str`` replaces the guard's own LLM for in-scope
        answers (for example a user's RAG chain); a hedged answer is then its text followed by
        the caveat line. ``speculative``: start the answer beside the check (``None``: the
        guard's ``speculative``; see the module docstring).
        """
        q, docs = validate_question(question), as_documents(documents)
        with deadline_block(self.deadline):
            held = self._held(start_answer, q, docs, responder, speculative)
            return settled(held, lambda: self._answer(q, docs, responder, held))

    def _answer(
        self, q: str, docs: tuple[Document, ...], responder: Responder | None, held: HeldAnswer[str] | None
    ) -> GuardResult:
        result, stage, policy = self._plan(q, docs, self._check(q, docs))
        try:
            result = _answered(result, self._respond(result, policy, responder, held))
        except ScopeGuardError as exc:
            return self._failed_step(exc, stage, result)
        if self.answer_check is None:
            return result
        try:
            return self.answer_check.check(result)
        except ScopeGuardError as exc:
            return self._failed_step(exc, "answer_check", result)

    async def aanswer(
        self,
        question: str,
        documents: Docs,
        *,
        responder: Responder | None = None,
        speculative: bool | None = None,
    ) -> GuardResult:
        """:meth:`answer`, awaited: the detector, the policies and the LLM through their async
        calls (a ``responder`` on a worker thread), each bounded by the deadline."""
        q, docs = validate_question(question), as_documents(documents)
        with deadline_block(self.deadline):
            held = self._held(astart_answer, q, docs, responder, speculative)
            return await asettled(held, self._aanswer(q, docs, responder, held))

    async def _aanswer(
        self,
        q: str,
        docs: tuple[Document, ...],
        responder: Responder | None,
        held: AsyncHeldAnswer[str] | None,
    ) -> GuardResult:
        result, stage, policy = self._plan(q, docs, await self._acheck(q, docs))
        try:
            answering = self._arespond(result, policy, responder, held)
            result = _answered(result, await _bounded(answering, "the answer"))
        except ScopeGuardError as exc:
            return self._failed_step(exc, stage, result)
        if self.answer_check is None:
            return result
        try:
            return await _bounded(self.answer_check.acheck(result), "the answer check")
        except ScopeGuardError as exc:
            return self._failed_step(exc, "answer_check", result)


def _answered(result: GuardResult, outcome: PolicyOutcome) -> GuardResult:
    """``result`` with the answering step's action and response."""
    return result.model_copy(update={"action": outcome.action, "response": outcome.response})


async def _bounded(step: Awaitable[T], what: str) -> T:
    """Await ``step``, cut off shortly after the deadline in force (backends usually stop first)."""
    budget = current_budget()
    if budget is None:
        return await step
    try:
        return await asyncio.wait_for(step, max(budget.remaining(), 0.0) + _GRACE_S)
    except asyncio.TimeoutError:
        raise LLMTimeoutError(
            f"{what} ran past the deadline of {budget.seconds:g}s", deadline=budget.seconds
        ) from None
