"""Bring your own model: LangChain's ``ChatOpenAI`` on a real llama.cpp server guards and answers."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_scopeguard import LangChainLLM
from lc_testkit import CORPUS, OUT_OF_SCOPE

from scopeguard import Action, Guard, from_spec
from scopeguard.detection.detectors.judge import JudgeDetector

langchain_openai = pytest.importorskip("langchain_openai", reason="pip install langchain-openai")


@pytest.mark.slow
@pytest.mark.integration
def test_guard_judges_and_answers_with_your_own_chat_openai(llama_server: str) -> None:
    own = langchain_openai.ChatOpenAI(base_url=llama_server, api_key="x", model="local", max_tokens=96)
    llm = from_spec(own)
    assert isinstance(llm, LangChainLLM)
    guard = Guard(detector=JudgeDetector(llm, votes=1, max_tokens=96), policy="defuse", llm=own)
    result = guard.answer(OUT_OF_SCOPE, CORPUS[0])
    verdict = result.verdict
    assert verdict.detector == "judge" and verdict.votes[0].raw.strip()  # the server really judged
    if verdict.label == "in_scope":
        assert result.action is Action.ANSWERED and not result.failed_closed
    else:  # out of scope, or no parseable verdict (failing closed): the defuse re-ask answers
        assert result.action is Action.DEFUSED and result.failed_closed == (verdict.label == "unknown")
    assert result.response and result.response.strip()
