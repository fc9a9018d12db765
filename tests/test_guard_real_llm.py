"""The Guard end to end: the judge detector and the defuse policy on a real llama.cpp server."""

from __future__ import annotations

import pytest

from scopeguard import Action, Guard
from scopeguard.detection.detectors.judge import JudgeDetector
from scopeguard.llm.openai_compat import OpenAIChatModel

# A tiny document written for this test.
DOC = (
    "The Kessin harbour library opened in 1998. It lends books and fishing maps, "
    "and it is open from Tuesday to Saturday."
)
QUESTIONS = {
    "in_scope": "When did the Kessin harbour library open?",
    "out_of_scope": "Who is the Kessin harbour library's head librarian?",
}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("kind", sorted(QUESTIONS))
def test_guard_with_judge_and_defuse_on_a_real_server(llama_server: str, kind: str) -> None:
    llm = OpenAIChatModel("qwen2.5-coder-0.5b", base_url=llama_server, timeout=600, max_tokens=96)
    judge = JudgeDetector(llm, votes=1, temperature=0.0, max_tokens=96)
    # the deadline this test means, not the guard's 120 s default: a slow or busy CPU must not cut
    # the real model's answer off (the LLM's own timeout is 600 s)
    guard = Guard(detector=judge, policy="defuse", llm=llm, on_error="fail_closed", deadline=600)
    result = guard.answer(QUESTIONS[kind], DOC)
    verdict = result.verdict
    assert verdict.detector == "judge" and verdict.llm_calls == 1 and len(verdict.votes) == 1
    assert verdict.votes[0].raw.strip()  # the server really answered
    # the action follows the verdict: out of scope -> defused (ZS-CoT re-ask), in scope -> answered,
    # no parseable verdict -> fail closed (treated as out of scope)
    if verdict.label == "in_scope":
        assert result.action is Action.ANSWERED and not result.failed_closed
    else:
        assert result.action is Action.DEFUSED
        assert result.failed_closed == (verdict.label == "unknown")
    assert result.response and result.response.strip()
