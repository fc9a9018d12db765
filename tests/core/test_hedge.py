"""The hedge zone: HedgePolicy, and the guard routing in-scope verdicts in the hedge band to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard import Action, ConfigurationError, Document, Guard, LLMConnectionError, Verdict
from scopeguard.policies import (
    HEDGE_CAVEAT,
    HedgePolicy,
    PolicyContext,
    available_policies,
    get_policy,
    with_caveat,
)
from scopeguard.testing import ScriptedChatModel, ScriptedDetector, calibration_profile

DOC = Document(id="d1", text="The Kestrel ferry carries 180 passengers and crosses in 35 minutes.")
QUESTION = "How many passengers does the Kestrel carry, and who built it?"
HEDGED = Verdict(label="in_scope", score=0.4, hedge=True, detector="scripted")
PLAIN = Verdict(label="in_scope", score=0.1, detector="scripted")
OUT = Verdict(label="out_of_scope", score=0.9, detector="scripted")


def _guard(verdict: Verdict, llm: ScriptedChatModel | None = None, **kw: object) -> Guard:
    return Guard(detector=ScriptedDetector(lambda q: verdict), llm=llm, **kw)  # type: ignore[arg-type]


# -- the policy ---------------------------------------------------------------------------------
def test_hedge_is_a_registered_policy() -> None:
    assert "hedge" in available_policies()
    assert isinstance(get_policy("hedge"), HedgePolicy)


def test_with_the_llm_the_hedge_policy_answers_with_the_hedged_prompt() -> None:
    llm = ScriptedChatModel(["It carries 180 passengers. The document does not say who built it."])
    outcome = HedgePolicy().apply(PolicyContext(QUESTION, (DOC,), HEDGED, llm))
    assert outcome.action is Action.HEDGED
    assert outcome.response == "It carries 180 passengers. The document does not say who built it."
    (call,) = llm.calls
    assert "say plainly which part of the question the document does not cover" in call.prompt
    assert "Kestrel ferry carries 180" in call.prompt and QUESTION in call.prompt
    assert call.temperature == 0.0


def test_with_a_responder_the_caveat_line_follows_its_answer() -> None:
    seen: list[tuple[str, int]] = []

    def responder(question: str, documents: object) -> str:
        seen.append((question, len(documents)))  # type: ignore[arg-type]
        return "It carries 180 passengers.\n"

    llm = ScriptedChatModel([])  # must not be called
    outcome = HedgePolicy().apply(PolicyContext(QUESTION, (DOC,), HEDGED, llm, responder))
    assert outcome.action is Action.HEDGED
    assert outcome.response == f"It carries 180 passengers.\n\n{HEDGE_CAVEAT}"
    assert seen == [(QUESTION, 1)] and llm.requests == 0
    custom = HedgePolicy(caveat="(partly covered)").apply(
        PolicyContext(QUESTION, (DOC,), HEDGED, None, responder)
    )
    assert custom.response.endswith("\n\n(partly covered)")


async def test_the_async_hedge_policy_matches_the_sync_one() -> None:
    llm = ScriptedChatModel(lambda prompt: "180 passengers.")
    ctx = PolicyContext(QUESTION, (DOC,), HEDGED, llm)
    assert (await HedgePolicy().aapply(ctx)) == HedgePolicy().apply(ctx)
    ctx = PolicyContext(QUESTION, (DOC,), HEDGED, None, lambda q, d: "180 passengers.")
    assert (await HedgePolicy().aapply(ctx)).response == f"180 passengers.\n\n{HEDGE_CAVEAT}"


def test_with_caveat_leaves_an_empty_answer_empty() -> None:
    assert with_caveat("") == "" and with_caveat("  ") == "  "
    assert with_caveat("Yes.  \n") == f"Yes.\n\n{HEDGE_CAVEAT}"


def test_without_an_llm_or_responder_the_hedge_policy_says_what_it_needs() -> None:
    with pytest.raises(ConfigurationError, match="needs an LLM"):
        HedgePolicy().apply(PolicyContext(QUESTION, (DOC,), HEDGED))


# -- the guard ----------------------------------------------------------------------------------
def test_the_guard_hedges_an_in_scope_verdict_in_the_hedge_band() -> None:
    llm = ScriptedChatModel(["180 passengers; the document does not say who built it."])
    result = _guard(HEDGED, llm, policy="refuse").answer(QUESTION, [DOC])
    assert result.action is Action.HEDGED and not result.failed_closed
    assert result.response == "180 passengers; the document does not say who built it."
    assert result.verdict.hedge and result.verdict.label == "in_scope"
    assert "does not cover" in llm.calls[0].prompt  # rag_hedged, not the guard's answer_template


def test_the_guard_answers_other_verdicts_as_before() -> None:
    llm = ScriptedChatModel(lambda prompt: "not hedged" if "does not cover" not in prompt else "hedged")
    assert _guard(PLAIN, llm).answer(QUESTION, [DOC]).action is Action.ANSWERED
    assert _guard(PLAIN, llm).answer(QUESTION, [DOC]).response == "not hedged"
    assert _guard(OUT, llm, policy="refuse").answer(QUESTION, [DOC]).action is Action.REFUSED
    # hedge set on an out-of-scope verdict is the policy's business, not the hedge's
    odd = OUT.model_copy(update={"hedge": True})
    assert _guard(odd, llm, policy="refuse").answer(QUESTION, [DOC]).action is Action.REFUSED


def test_the_responder_answers_and_the_caveat_follows() -> None:
    llm = ScriptedChatModel([])
    result = _guard(HEDGED, llm).answer(QUESTION, [DOC], responder=lambda q, d: "180 passengers.")
    assert result.action is Action.HEDGED
    assert result.response == f"180 passengers.\n\n{HEDGE_CAVEAT}" and llm.requests == 0


def test_hedge_none_answers_hedged_verdicts_plainly_and_other_policies_can_be_named() -> None:
    llm = ScriptedChatModel(lambda prompt: "180 passengers.")
    plain = _guard(HEDGED, llm, hedge=None)
    assert plain.hedge is None and plain.hedging(HEDGED) is None
    result = plain.answer(QUESTION, [DOC])
    assert (result.action, result.response) == (Action.ANSWERED, "180 passengers.")
    assert _guard(HEDGED, llm, hedge="clarify").answer(QUESTION, [DOC]).action is Action.CLARIFIED
    custom = _guard(HEDGED, llm, hedge=lambda q, d, v: f"careful: {v.score}").answer(QUESTION, [DOC])
    assert (custom.action, custom.response) == (Action.CUSTOM, "careful: 0.4")
    with pytest.raises(ConfigurationError, match=r"valid names:.*hedge"):
        _guard(HEDGED, llm, hedge="hedgehog")


async def test_the_async_guard_hedges_too() -> None:
    llm = ScriptedChatModel(lambda prompt: "180 passengers." if "does not cover" in prompt else "plain")
    guard = _guard(HEDGED, llm)
    result = await guard.aanswer(QUESTION, [DOC])
    assert (result.action, result.response) == (Action.HEDGED, "180 passengers.")
    result = await guard.aanswer(QUESTION, [DOC], responder=lambda q, d: "mine")
    assert (result.action, result.response) == (Action.HEDGED, f"mine\n\n{HEDGE_CAVEAT}")
    (batched,) = await guard.abatch([(QUESTION, [DOC])])
    assert batched.action is Action.HEDGED  # type: ignore[union-attr]


def test_a_failing_hedge_llm_fails_closed() -> None:
    llm = ScriptedChatModel([LLMConnectionError("endpoint refused", endpoint="http://x/v1")])
    result = _guard(HEDGED, llm).answer(QUESTION, [DOC])
    assert result.action is Action.REFUSED and result.failed_closed
    assert result.metadata["error_stage"] == "hedge" and "refused" in result.metadata["error"]
    assert result.metadata["error_kind"] == "upstream"


async def test_a_failing_hedge_responder_fails_closed_async() -> None:
    def broken(question: str, documents: object) -> str:
        raise LLMConnectionError("chain down", endpoint="http://chain")

    result = await _guard(HEDGED).aanswer(QUESTION, [DOC], responder=broken)
    assert result.action is Action.REFUSED and result.failed_closed
    assert result.metadata["error_stage"] == "hedge"
    with pytest.raises(LLMConnectionError):
        await _guard(HEDGED, on_error="raise").aanswer(QUESTION, [DOC], responder=broken)


@pytest.mark.parametrize(
    ("score", "action"), [(0.1, Action.ANSWERED), (0.45, Action.HEDGED), (0.8, Action.REFUSED)]
)
def test_a_calibrated_guard_answers_hedges_or_refuses_by_the_profiles_bands(
    tmp_path: Path, score: float, action: Action
) -> None:
    folder = calibration_profile(folder=tmp_path)  # threshold 0.6, hedged from 0.4
    llm = ScriptedChatModel(lambda prompt: "hedged" if "does not cover" in prompt else "answered")
    guard = Guard(detector=ScriptedDetector(lambda q: score), llm=llm, policy="refuse", calibration=folder)
    result = guard.answer(QUESTION, [DOC])
    assert result.action is action
    assert result.verdict.hedge is (action is Action.HEDGED)
    if action is not Action.REFUSED:
        assert result.response == action.value
