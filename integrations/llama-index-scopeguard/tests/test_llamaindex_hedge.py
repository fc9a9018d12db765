"""GuardedQueryEngine with a calibrated guard: answered, hedged (synthesized, then the caveat) or
refused, sync and async, streaming or not."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import IN_SCOPE, OUT_OF_SCOPE, record_events
from llama_index.core.base.response.schema import AsyncStreamingResponse, Response, StreamingResponse
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index_scopeguard import GuardedQueryEngine, ScopeGuardLLM, ScopeGuardVerdictEvent, rag_prompt

from scopeguard import Action, Guard
from scopeguard.policies import HEDGE_CAVEAT
from scopeguard.testing import ScriptedDetector, StreamingScriptedChatModel, calibration_profile

ANSWER = "It opened in 1887."
HEDGY = "When did the Brindle Valley railway open, and who paid for it?"
SCORES = {IN_SCOPE: 0.1, HEDGY: 0.45, OUT_OF_SCOPE: 0.9}
HEDGED = f"{ANSWER}\n\n{HEDGE_CAVEAT}"


@pytest.fixture
def profile_dir(tmp_path: Path) -> Path:
    return calibration_profile(folder=tmp_path / "profile")  # threshold 0.6, hedged from 0.4


def _engine(retriever, profile_dir: Path, *, streaming: bool = False, **guard: object) -> GuardedQueryEngine:
    scripted = StreamingScriptedChatModel(lambda prompt: ANSWER)  # streams word by word
    return GuardedQueryEngine(
        retriever=retriever,
        guard=Guard(detector=ScriptedDetector(SCORES), policy="refuse", calibration=profile_dir, **guard),  # type: ignore[arg-type]
        response_synthesizer=get_response_synthesizer(
            llm=ScopeGuardLLM(chat_model=scripted), text_qa_template=rag_prompt(), streaming=streaming
        ),
    )


def _meta(response):
    return response.metadata["scopeguard"]


def test_a_calibrated_guard_answers_hedges_and_refuses(retriever, profile_dir):
    engine = _engine(retriever, profile_dir)
    answered, hedged, refused = (engine.query(q) for q in (IN_SCOPE, HEDGY, OUT_OF_SCOPE))
    assert (_meta(answered)["action"], str(answered)) == (Action.ANSWERED, ANSWER)
    assert isinstance(hedged, Response) and str(hedged) == HEDGED
    assert _meta(hedged)["action"] == Action.HEDGED and _meta(hedged)["verdict"].hedge
    assert _meta(hedged)["failed_closed"] is False and len(hedged.source_nodes) == 1
    assert _meta(refused)["action"] == Action.REFUSED


async def test_aquery_hedges_too(retriever, profile_dir):
    response = await _engine(retriever, profile_dir).aquery(HEDGY)
    assert (_meta(response)["action"], str(response)) == (Action.HEDGED, HEDGED)


def test_a_streamed_hedged_answer_ends_with_the_caveat_token(retriever, profile_dir):
    engine = _engine(retriever, profile_dir, streaming=True)
    response = engine.query(HEDGY)
    assert isinstance(response, StreamingResponse) and _meta(response)["action"] == Action.HEDGED
    tokens = list(response.response_gen)
    assert "".join(tokens) == HEDGED and tokens[-1] == f"\n\n{HEDGE_CAVEAT}" and len(tokens) > 2
    assert str(engine.query(HEDGY)) == HEDGED  # read whole


async def test_an_async_streamed_hedged_answer_ends_with_the_caveat_token(retriever, profile_dir):
    response = await _engine(retriever, profile_dir, streaming=True).aquery(HEDGY)
    assert isinstance(response, AsyncStreamingResponse) and _meta(response)["action"] == Action.HEDGED
    tokens = [t async for t in response.async_response_gen()]
    assert "".join(tokens) == HEDGED and tokens[-1] == f"\n\n{HEDGE_CAVEAT}"
    assert (await response.get_response()).response == HEDGED


def test_hedge_none_answers_plainly_and_another_policy_responds_as_a_policy(retriever, profile_dir):
    plain = _engine(retriever, profile_dir, hedge=None).query(HEDGY)
    assert (_meta(plain)["action"], str(plain)) == (Action.ANSWERED, ANSWER)
    clarified = _engine(retriever, profile_dir, streaming=True, hedge="clarify").query(HEDGY)
    assert isinstance(clarified, StreamingResponse) and _meta(clarified)["action"] == Action.CLARIFIED
    assert "do not" in "".join(clarified.response_gen)


def test_the_hedged_verdict_event_says_so(retriever, profile_dir):
    with record_events() as events:
        _engine(retriever, profile_dir).query(HEDGY)
    (event,) = [e for e in events if isinstance(e, ScopeGuardVerdictEvent)]
    assert (event.label, event.action, event.hedge, event.out_of_scope) == ("in_scope", "hedged", True, False)
