"""Answer-level guarding: verify a :class:`~scopeguard.types.GuardResult`'s answer after generation.

Out-of-scope detection guards the question; this guards the answer. The verification is stored in
``result.metadata["verification"]``; an answer the corpus contradicts is flagged
(``on_contradiction="flag"``: action ``flagged``, response kept) or replaced by a refusal
(``"replace"``: action ``refused``, template ``verify_refusal``; the original answer is kept in
``metadata["original_response"]``).
"""

from __future__ import annotations

import logging
from typing import Literal

from scopeguard.errors import ConfigurationError, ScopeGuardError
from scopeguard.prompts import render
from scopeguard.types import Action, GuardResult
from scopeguard.verification.loop import AnswerVerifier, Source, VerificationResult

__all__ = ["OnContradiction", "OnVerifyError", "VerifyAnswers", "averify_guard_result", "verify_guard_result"]

logger = logging.getLogger(__name__)

OnContradiction = Literal["flag", "replace"]
OnVerifyError = Literal["record", "raise"]

_VERIFIABLE = (Action.ANSWERED, Action.HEDGED, Action.FLAGGED, Action.DEFUSED)
"""Actions whose response is an LLM answer (refusals and clarifications are canned text); a hedged
answer is one with a caveat line, verified as a whole."""


def _check(on_contradiction: str, on_error: str) -> None:
    if on_contradiction not in ("flag", "replace"):
        raise ConfigurationError(f"on_contradiction must be 'flag' or 'replace', got {on_contradiction!r}")
    if on_error not in ("record", "raise"):
        raise ConfigurationError(f"on_error must be 'record' or 'raise', got {on_error!r}")


def _needs_check(result: GuardResult) -> bool:
    return result.response is not None and bool(result.response.strip()) and result.action in _VERIFIABLE


def _failed(result: GuardResult, exc: ScopeGuardError) -> VerificationResult:
    logger.warning("answer verification failed: %s", exc)
    return VerificationResult(
        question=result.question, answer=result.response or "", verdict="unknown", error=str(exc)
    )


def _apply(result: GuardResult, verification: VerificationResult, on_contradiction: str) -> GuardResult:
    metadata = {**result.metadata, "verification": verification}
    if not verification.is_hallucination:
        return result.model_copy(update={"metadata": metadata})
    if on_contradiction == "replace":
        evidence_id = verification.evidence[0].id if verification.evidence else ""
        metadata["original_response"] = result.response
        return result.model_copy(
            update={
                "action": Action.REFUSED,
                "response": render("verify_refusal", evidence_id=evidence_id),
                "metadata": metadata,
            }
        )
    return result.model_copy(update={"action": Action.FLAGGED, "metadata": metadata})


def verify_guard_result(
    result: GuardResult,
    verifier: AnswerVerifier,
    *,
    on_contradiction: OnContradiction = "flag",
    source: Source | None = None,
    on_error: OnVerifyError = "record",
) -> GuardResult:
    """Verify the answer in ``result`` against ``source`` (default: the result's own documents).

    Results without an LLM answer (refused, clarified, check-only) come back unchanged. A failed
    verification (LLM error, bad documents) is recorded as verdict ``unknown`` with its error and
    leaves the answer alone (``on_error="record"``), or raises (``"raise"``). Configuration errors
    (missing extra, bad retriever name) always raise.
    """
    _check(on_contradiction, on_error)
    if not _needs_check(result):
        return result
    src = source if source is not None else (verifier.retriever or result.documents)
    try:
        verification = verifier.verify(result.question, result.response, src)
    except ScopeGuardError as exc:
        if on_error == "raise" or isinstance(exc, ConfigurationError):
            raise
        verification = _failed(result, exc)
    return _apply(result, verification, on_contradiction)


async def averify_guard_result(
    result: GuardResult,
    verifier: AnswerVerifier,
    *,
    on_contradiction: OnContradiction = "flag",
    source: Source | None = None,
    on_error: OnVerifyError = "record",
) -> GuardResult:
    """Async twin of :func:`verify_guard_result`."""
    _check(on_contradiction, on_error)
    if not _needs_check(result):
        return result
    src = source if source is not None else (verifier.retriever or result.documents)
    try:
        verification = await verifier.averify(result.question, result.response, src)
    except ScopeGuardError as exc:
        if on_error == "raise" or isinstance(exc, ConfigurationError):
            raise
        verification = _failed(result, exc)
    return _apply(result, verification, on_contradiction)


class VerifyAnswers:
    """An :class:`~scopeguard.guard.AnswerCheck` for ``Guard(answer_check=...)``.

    >>> check = VerifyAnswers(verifier, on_contradiction="replace")
    >>> guard = Guard(detector="default", llm="local", answer_check=check)
    """

    def __init__(
        self,
        verifier: AnswerVerifier,
        *,
        on_contradiction: OnContradiction = "flag",
        source: Source | None = None,
        on_error: OnVerifyError = "record",
    ) -> None:
        _check(on_contradiction, on_error)
        self.verifier = verifier
        self.on_contradiction: OnContradiction = on_contradiction
        self.source = source
        self.on_error: OnVerifyError = on_error

    def check(self, result: GuardResult) -> GuardResult:
        return verify_guard_result(
            result,
            self.verifier,
            on_contradiction=self.on_contradiction,
            source=self.source,
            on_error=self.on_error,
        )

    async def acheck(self, result: GuardResult) -> GuardResult:
        return await averify_guard_result(
            result,
            self.verifier,
            on_contradiction=self.on_contradiction,
            source=self.source,
            on_error=self.on_error,
        )
