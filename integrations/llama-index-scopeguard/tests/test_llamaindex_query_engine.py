from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import IN_SCOPE, OUT_OF_SCOPE, ancestors, record_events, record_spans
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.llms import MockLLM
from llama_index.core.response_synthesizers import get_response_synthesizer
from llama_index_scopeguard import GuardedQueryEngine, ScopeGuardLLM, ScopeGuardVerdictEvent, rag_prompt
from pydantic import ValidationError

from scopeguard import Action, DetectionError, Guard, InputError, Verdict
from scopeguard.testing import ScriptedChatModel

ANSWER = "It opened in 1887."


def _meta(response):
    return response.metadata["scopeguard"]


def test_in_scope_is_synthesized_from_the_retrieved_nodes(retriever, coverage_detector):
    scripted = ScriptedChatModel(lambda prompt: ANSWER)
    engine = GuardedQueryEngine(
        retriever=retriever,
        guard=Guard(detector=coverage_detector),
        response_synthesizer=get_response_synthesizer(
            llm=ScopeGuardLLM(chat_model=scripted), text_qa_template=rag_prompt()
        ),
    )
    response = engine.query(IN_SCOPE)
    assert str(response) == ANSWER
    assert isinstance(_meta(response)["verdict"], Verdict) and _meta(response)["verdict"].label == "in_scope"
    assert _meta(response)["action"] == Action.ANSWERED and _meta(response)["failed_closed"] is False
    (call,) = scripted.calls
    assert "Brindle Valley railway opened in 1887" in call.prompt and IN_SCOPE in call.prompt
    assert "Read the document and answer the question" in call.prompt  # scopeguard's RAG Basic prompt


def test_out_of_scope_is_defused_with_the_guards_llm(retriever, coverage_detector):
    llm = ScriptedChatModel(lambda prompt: "The document does not say who the engineer was.")
    engine = GuardedQueryEngine(
        retriever=retriever, guard=Guard(detector=coverage_detector, policy="defuse", llm=llm), llm=MockLLM()
    )
    response = engine.query(OUT_OF_SCOPE)
    assert _meta(response)["action"] == Action.DEFUSED and "does not say" in str(response)
    assert _meta(response)["verdict"].uncovered == ("chief", "engineer")
    assert len(response.source_nodes) == 1 and len(llm.calls) == 1


def test_default_synthesizer_uses_the_guards_llm(retriever, coverage_detector):
    llm = ScriptedChatModel(lambda prompt: ANSWER)
    engine = GuardedQueryEngine(retriever=retriever, guard=Guard(detector=coverage_detector, llm=llm))
    assert str(engine.query(IN_SCOPE)) == ANSWER
    with pytest.raises(ValidationError, match="needs response_synthesizer"):
        GuardedQueryEngine(retriever=retriever, guard=Guard(detector=coverage_detector))


async def test_aquery_is_really_async(retriever, slow_detector):
    engine = GuardedQueryEngine(retriever=retriever, guard=Guard(detector=slow_detector), llm=MockLLM())
    a, b = await asyncio.gather(engine.aquery(IN_SCOPE), engine.aquery(OUT_OF_SCOPE))
    assert slow_detector.max_in_flight == 2
    assert (_meta(a)["action"], _meta(b)["action"]) == (Action.ANSWERED, Action.CLARIFIED)


@pytest.mark.parametrize("use_async", [False, True])
def test_the_retriever_runs_inside_the_engines_span(retriever, coverage_detector, use_async):
    engine = GuardedQueryEngine(retriever=retriever, guard=Guard(detector=coverage_detector), llm=MockLLM())
    with record_spans() as spans:
        if use_async:
            asyncio.run(engine.aquery(IN_SCOPE))
        else:
            engine.query(IN_SCOPE)
    retrieve = [s.id_ for s in spans.completed_spans if s.id_.split("-")[0].endswith("retrieve")]
    assert retrieve, [s.id_ for s in spans.completed_spans]
    chain = ancestors(spans, retrieve[0])
    assert any(a.startswith("GuardedQueryEngine.") for a in chain), chain


@pytest.mark.parametrize(
    ("on_error", "action", "closed"),
    [("fail_closed", Action.REFUSED, True), ("fail_open", Action.ANSWERED, False)],
)
def test_detector_failure_follows_on_error(retriever, failing_detector, on_error, action, closed):
    guard = Guard(detector=failing_detector, policy="refuse", on_error=on_error)
    response = GuardedQueryEngine(retriever=retriever, guard=guard, llm=MockLLM()).query(IN_SCOPE)
    assert _meta(response)["action"] == action and _meta(response)["failed_closed"] is closed
    assert _meta(response)["verdict"].error == "detector backend is down"
    with pytest.raises(DetectionError):
        GuardedQueryEngine(
            retriever=retriever, guard=Guard(detector=failing_detector, on_error="raise"), llm=MockLLM()
        ).query(IN_SCOPE)


def test_empty_question_is_a_clear_error(retriever, coverage_detector):
    engine = GuardedQueryEngine(retriever=retriever, guard=Guard(detector=coverage_detector), llm=MockLLM())
    with pytest.raises(InputError, match="empty"):
        engine.query("  ")


@pytest.mark.slow
@pytest.mark.integration
def test_real_local_llm(retriever, local_chat_model):
    engine = GuardedQueryEngine(
        retriever=retriever,
        guard=Guard(detector="lexical"),
        response_synthesizer=get_response_synthesizer(
            llm=ScopeGuardLLM(chat_model=local_chat_model, max_tokens=24), text_qa_template=rag_prompt()
        ),
    )
    response = engine.query(IN_SCOPE)
    assert _meta(response)["action"] == Action.ANSWERED and "1887" in str(response)


def _streaming_engine(retriever, detector, policy="clarify"):
    llm = ScopeGuardLLM(chat_model=ScriptedChatModel(lambda prompt: ANSWER))
    return GuardedQueryEngine(
        retriever=retriever,
        guard=Guard(detector=detector, policy=policy),
        response_synthesizer=get_response_synthesizer(llm=llm, streaming=True),
    )


def test_streaming_out_of_scope_streams_the_policys_response(retriever, coverage_detector, capsys):
    engine = _streaming_engine(retriever, coverage_detector)
    response = engine.query(OUT_OF_SCOPE)
    assert isinstance(response, StreamingResponse) and _meta(response)["action"] == Action.CLARIFIED
    text = "".join(response.response_gen)
    assert "engineer" in text and len(response.source_nodes) == 1
    response = engine.query(OUT_OF_SCOPE)
    response.print_response_stream()
    assert capsys.readouterr().out == text
    answered = engine.query(IN_SCOPE)  # in scope: the synthesizer's own stream
    assert isinstance(answered, StreamingResponse) and "".join(answered.response_gen) == ANSWER


async def test_async_streaming_out_of_scope(retriever, coverage_detector):
    response = await _streaming_engine(retriever, coverage_detector, "refuse").aquery(OUT_OF_SCOPE)
    assert isinstance(response, AsyncStreamingResponse) and _meta(response)["action"] == Action.REFUSED
    text = "".join([t async for t in response.async_response_gen()])
    assert text and text == (await response.get_response()).response


@pytest.mark.parametrize("use_async", [False, True])
async def test_the_verdict_is_an_instrumentation_event_in_the_engines_span(
    retriever, coverage_detector, use_async
):
    engine = GuardedQueryEngine(retriever=retriever, guard=Guard(detector=coverage_detector), llm=MockLLM())
    with record_events() as events, record_spans() as spans:
        await engine.aquery(OUT_OF_SCOPE) if use_async else engine.query(OUT_OF_SCOPE)
    (event,) = [e for e in events if isinstance(e, ScopeGuardVerdictEvent)]
    assert (event.label, event.detector, event.action) == ("out_of_scope", "coverage", "clarified")
    assert event.out_of_scope is True and event.failed_closed is False and event.query == OUT_OF_SCOPE
    engine_spans = [s.id_ for s in spans.completed_spans if "GuardedQueryEngine" in s.id_]
    assert event.span_id in engine_spans
