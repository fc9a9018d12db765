"""Answer-level guarding of GuardResults: flag or replace a contradicted answer, sync and async."""

from __future__ import annotations

import pytest
from verify_helpers import CORPUS, TinyRetriever

from scopeguard.errors import ConfigurationError, LLMConnectionError
from scopeguard.policies import HEDGE_CAVEAT
from scopeguard.prompts import render
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Action, GuardResult, Verdict
from scopeguard.verification import (
    AnswerVerifier,
    VerificationResult,
    averify_guard_result,
    verify_guard_result,
)

QUESTION = "What colour was the Zorbian lighthouse painted?"


def answered(response: str = "It was painted red.", action: Action = Action.ANSWERED) -> GuardResult:
    return GuardResult(
        question=QUESTION,
        verdict=Verdict(label="in_scope", score=0.1),
        action=action,
        response=response,
        documents=tuple(CORPUS),
        metadata={"trace": "kept"},
    )


def verifier(verdict: str, tiny: TinyRetriever | None = None) -> AnswerVerifier:
    return AnswerVerifier(ScriptedChatModel([verdict]), retriever=tiny)


def test_flag_keeps_the_answer_and_records_the_verification(tiny: TinyRetriever) -> None:
    out = verify_guard_result(answered(), verifier("No", tiny), on_contradiction="flag")
    assert out.action == Action.FLAGGED and out.response == "It was painted red."
    v = out.metadata["verification"]
    assert isinstance(v, VerificationResult) and v.verdict == "contradicted"
    assert v.evidence[0].id == "p1" and out.metadata["trace"] == "kept"
    assert '"verdict":"contradicted"' in out.model_dump_json()  # serialisable with the result


def test_replace_swaps_a_contradicted_answer_for_a_refusal(tiny: TinyRetriever) -> None:
    out = verify_guard_result(answered(), verifier("No", tiny), on_contradiction="replace")
    assert out.action == Action.REFUSED
    assert out.response == render("verify_refusal", evidence_id="p1")
    assert out.metadata["original_response"] == "It was painted red."


def test_supported_answer_is_untouched_apart_from_metadata(tiny: TinyRetriever) -> None:
    original = answered("It was painted green.")
    out = verify_guard_result(original, verifier("Yes", tiny), on_contradiction="replace")
    assert out.action == Action.ANSWERED and out.response == original.response
    assert out.metadata["verification"].verdict == "supported"


def test_defaults_to_the_results_own_documents() -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    out = verify_guard_result(answered(), verifier("No"))
    assert out.action == Action.FLAGGED
    assert out.metadata["verification"].evidence[0].id == "p1#p0"


def test_a_hedged_answer_is_verified_like_an_answer(tiny: TinyRetriever) -> None:
    hedged = answered(f"It was painted red.\n\n{HEDGE_CAVEAT}", action=Action.HEDGED)
    out = verify_guard_result(hedged, verifier("No", tiny), on_contradiction="replace")
    assert out.action == Action.REFUSED and out.metadata["original_response"] == hedged.response
    kept = verify_guard_result(hedged, verifier("Yes", tiny))
    assert kept.action == Action.HEDGED and kept.metadata["verification"].verdict == "supported"


def test_results_without_an_llm_answer_are_not_verified(tiny: TinyRetriever) -> None:
    llm = ScriptedChatModel([])
    refused = answered("I can't answer that.", action=Action.REFUSED)
    assert verify_guard_result(refused, AnswerVerifier(llm, retriever=tiny)) is refused
    assert llm.calls == []


def test_failures_are_recorded_or_raised(tiny: TinyRetriever) -> None:
    down = AnswerVerifier(ScriptedChatModel([LLMConnectionError("refused", endpoint="x")]), retriever=tiny)
    out = verify_guard_result(answered(), down)
    assert out.action == Action.ANSWERED and out.response == "It was painted red."
    assert out.metadata["verification"].verdict == "unknown"
    assert "refused" in out.metadata["verification"].error
    down2 = AnswerVerifier(ScriptedChatModel([LLMConnectionError("refused")]), retriever=tiny)
    with pytest.raises(LLMConnectionError):
        verify_guard_result(answered(), down2, on_error="raise")
    with pytest.raises(ConfigurationError, match="on_contradiction must be 'flag' or 'replace'"):
        verify_guard_result(answered(), verifier("No", tiny), on_contradiction="drop")  # type: ignore[arg-type]


async def test_async_twin(tiny: TinyRetriever) -> None:
    out = await averify_guard_result(answered(), verifier("No", tiny), on_contradiction="replace")
    assert out.action == Action.REFUSED and out.metadata["verification"].verdict == "contradicted"


class _InScope:
    name = "always-in"

    def detect(self, question: str, documents: object) -> Verdict:
        return Verdict(label="in_scope", score=0.0)

    async def adetect(self, question: str, documents: object) -> Verdict:
        return self.detect(question, documents)


def test_guard_runs_the_answer_check_after_generation(tiny: TinyRetriever) -> None:
    from scopeguard import Guard
    from scopeguard.verification import VerifyAnswers

    guard = Guard(
        detector=_InScope(),
        llm=ScriptedChatModel(["It was painted red."]),
        answer_check=VerifyAnswers(verifier("No", tiny), on_contradiction="replace"),
    )
    out = guard.answer(QUESTION, CORPUS)
    assert out.action == Action.REFUSED
    assert out.metadata["original_response"] == "It was painted red."
    assert out.metadata["verification"].verdict == "contradicted"


async def test_guard_async_answer_check(tiny: TinyRetriever) -> None:
    from scopeguard import Guard
    from scopeguard.verification import VerifyAnswers

    guard = Guard(
        detector=_InScope(),
        llm=ScriptedChatModel(["It was painted green."]),
        answer_check=VerifyAnswers(verifier("Yes", tiny)),
    )
    out = await guard.aanswer(QUESTION, CORPUS)
    assert out.action == Action.ANSWERED and out.metadata["verification"].verdict == "supported"
