"""Bring your own model: LlamaIndex's ``OpenAILike`` on a real llama.cpp server guards and answers."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import CORPUS, OUT_OF_SCOPE
from llama_index_scopeguard import LlamaIndexLLM

from scopeguard import Action, Guard, from_spec
from scopeguard.detection.detectors.judge import JudgeDetector

openai_like = pytest.importorskip(
    "llama_index.llms.openai_like", reason="pip install llama-index-llms-openai-like"
)


@pytest.mark.slow
@pytest.mark.integration
def test_guard_judges_and_answers_with_your_own_openai_like(llama_server: str) -> None:
    own = openai_like.OpenAILike(
        api_base=llama_server, api_key="x", model="local", is_chat_model=True, max_tokens=96
    )
    llm = from_spec(own)
    assert isinstance(llm, LlamaIndexLLM)
    guard = Guard(detector=JudgeDetector(llm, votes=1, max_tokens=96), policy="defuse", llm=own)
    result = guard.answer(OUT_OF_SCOPE, CORPUS[0])
    verdict = result.verdict
    assert verdict.detector == "judge" and verdict.votes[0].raw.strip()  # the server really judged
    if verdict.label == "in_scope":
        assert result.action is Action.ANSWERED and not result.failed_closed
    else:  # out of scope, or no parseable verdict (failing closed): the defuse re-ask answers
        assert result.action is Action.DEFUSED and result.failed_closed == (verdict.label == "unknown")
    assert result.response and result.response.strip()
