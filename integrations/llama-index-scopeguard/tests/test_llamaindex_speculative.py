"""``GuardedQueryEngine(speculative=True)`` with real LlamaIndex objects (a retriever, the response
synthesizer, an LLM): the synthesis starts beside the check and is held until the verdict. The
detector answers only once the LLM has been asked (events, never timings)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import record_events
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index_scopeguard import GuardedQueryEngine, ScopeGuardLLM, rag_prompt
from llama_index_scopeguard._common import ScopeGuardSpeculationEvent

from scopeguard import Action, DetectionError, Guard
from scopeguard.testing import ScriptedDetector, StreamingScriptedChatModel

QUESTION = "When did the Brindle Valley railway open?"
ANSWER = "It opened in 1887."
SECRET = "A speculative answer the user must never see."
WAIT = 10.0  # a bound on waiting for an event the test's own flow sets (never reached)


class _Fixed(BaseRetriever):
    """Retrieves the same passage for every question."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text="The Brindle Valley railway opened in 1887.", id_="c0"))]


def _engine(text: str, reply: Any, *, streaming: bool = False, **options: Any) -> tuple[Any, Any]:
    """A speculative engine whose LLM answers ``text`` and whose detector gives ``reply`` once the
    LLM has been asked; also the chat model (its ``requests``)."""
    asked = threading.Event()

    def answer(_prompt: str) -> str:
        asked.set()
        return text

    def verdict(_question: str) -> Any:
        assert asked.wait(WAIT), "the synthesis did not start before the verdict"
        return reply

    chat = StreamingScriptedChatModel(answer)
    synthesizer = get_response_synthesizer(
        llm=ScopeGuardLLM(chat_model=chat), text_qa_template=rag_prompt(), streaming=streaming
    )
    engine = GuardedQueryEngine(
        retriever=_Fixed(),
        guard=Guard(detector=ScriptedDetector(verdict), **options),
        response_synthesizer=synthesizer,
        speculative=True,
    )
    return engine, chat


def test_in_scope_releases_the_synthesized_answer() -> None:
    engine, chat = _engine(ANSWER, "in_scope")
    response = engine.query(QUESTION)
    assert str(response) == ANSWER and chat.requests == 1
    meta = response.metadata["scopeguard"]
    assert meta["action"] == Action.ANSWERED and meta["speculation"] == {"outcome": "released"}


def test_out_of_scope_drops_the_synthesis_and_counts_it() -> None:
    engine, chat = _engine(SECRET, "out_of_scope", policy="clarify")
    with record_events() as events:
        response = engine.query(QUESTION)
    assert SECRET not in str(response) and SECRET not in repr(response.metadata)
    meta = response.metadata["scopeguard"]
    assert meta["action"] == Action.CLARIFIED and meta["speculation"]["outcome"] == "discarded"
    assert chat.requests == 1  # asked speculatively, then dropped
    (event,) = [e for e in events if isinstance(e, ScopeGuardSpeculationEvent)]
    assert event.outcome == "discarded" and event.discarded_seconds >= 0


def test_a_failing_check_fails_closed_without_the_held_answer() -> None:
    engine, _ = _engine(SECRET, DetectionError("detector backend is down"), policy="refuse")
    response = engine.query(QUESTION)
    assert response.metadata["scopeguard"]["failed_closed"] is True
    assert SECRET not in str(response)


def test_a_streamed_answer_is_held_then_streams_whole() -> None:
    engine, _ = _engine(ANSWER, "in_scope", streaming=True)
    response = engine.query(QUESTION)
    assert isinstance(response, StreamingResponse)
    assert "".join(response.response_gen) == ANSWER


def test_the_flag_policy_takes_the_held_answer() -> None:
    engine, chat = _engine(ANSWER, "out_of_scope", policy="flag")
    response = engine.query(QUESTION)
    assert response.metadata["scopeguard"]["action"] == Action.FLAGGED and str(response) == ANSWER
    assert chat.requests == 1


async def test_async_out_of_scope_drops_the_synthesis() -> None:
    engine, _ = _engine(SECRET, "out_of_scope", policy="refuse")
    response = await engine.aquery(QUESTION)
    assert SECRET not in str(response)
    assert response.metadata["scopeguard"]["speculation"]["outcome"] == "discarded"


async def test_async_streamed_answer_is_held_then_streams_whole() -> None:
    engine, _ = _engine(ANSWER, "in_scope", streaming=True)
    response = await engine.aquery(QUESTION)
    assert isinstance(response, AsyncStreamingResponse)
    assert "".join([t async for t in response.async_response_gen()]) == ANSWER
