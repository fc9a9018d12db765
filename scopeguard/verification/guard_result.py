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
    check = VerifyAnswers(verifier, on_contradiction=on_contradiction, source=source, on_error=on_error)
    return check.check(result)


async def averify_guard_result(
    result: GuardResult,
    verifier: AnswerVerifier,
    *,
    on_contradiction: OnContradiction = "flag",
    source: Source | None = None,
    on_error: OnVerifyError = "record",
) -> GuardResult:
    """Async twin of :func:`verify_guard_result`."""
    check = VerifyAnswers(verifier, on_contradiction=on_contradiction, source=source, on_error=on_error)
    return await check.acheck(result)


class VerifyAnswers:
    """An :class:`~scopeguard.guard.AnswerCheck` for ``Guard(answer_check=...)``, with the settings
    of :func:`verify_guard_result` (which runs one).

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

    def _source(self, result: GuardResult) -> Source | None:
        """What ``result``'s answer is verified against; ``None`` when it has no answer to verify."""
        if not _needs_check(result):
            return None
        return self.source if self.source is not None else (self.verifier.retriever or result.documents)

    def _recorded(self, result: GuardResult, exc: ScopeGuardError) -> VerificationResult:
        """A failed verification as verdict ``unknown``; raised again with ``on_error="raise"`` or
        for a configuration error."""
        if self.on_error == "raise" or isinstance(exc, ConfigurationError):
            raise exc
        return _failed(result, exc)

    def check(self, result: GuardResult) -> GuardResult:
        src = self._source(result)
        if src is None:
            return result
        try:
            verification = self.verifier.verify(result.question, result.response, src)
        except ScopeGuardError as exc:
            verification = self._recorded(result, exc)
        return _apply(result, verification, self.on_contradiction)

    async def acheck(self, result: GuardResult) -> GuardResult:
        src = self._source(result)
        if src is None:
            return result
        try:
            verification = await self.verifier.averify(result.question, result.response, src)
        except ScopeGuardError as exc:
            verification = self._recorded(result, exc)
        return _apply(result, verification, self.on_contradiction)
