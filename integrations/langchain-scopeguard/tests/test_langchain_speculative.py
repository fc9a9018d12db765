"""``GuardedRAG(speculative=True)`` with real LangChain objects (a prompt, FakeListChatModel, a
parser): the chain starts beside the check and is held until the verdict. The detector answers
only once the chain has started (events, never timings)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda
from langchain_scopeguard import GuardedRAG, rag_prompt
from langchain_scopeguard._speculative import SPECULATION_RUN_NAME

from scopeguard import Action, DetectionError, Guard
from scopeguard.testing import ScriptedDetector

QUESTION = "When did the Brindle Valley railway open?"
DOCS = [LCDocument(page_content="The Brindle Valley railway opened in 1887.")]
ANSWER = "It opened in 1887."
SECRET = "A speculative answer the user must never see."
WAIT = 10.0  # a bound on waiting for an event the test's own flow sets (never reached)


class _Everything(BaseCallbackHandler):
    """Records every callback's arguments, to show that nothing of a dropped answer reaches them."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
        self.runs.append((kw.get("name") or "", kw.get("metadata") or {}))
        self.seen.append(repr(inputs))

    def on_chain_end(self, outputs: Any, **kw: Any) -> None:
        self.seen.append(repr(outputs))

    def on_llm_new_token(self, token: str, **kw: Any) -> None:
        self.seen.append(token)

    def on_llm_end(self, response: Any, **kw: Any) -> None:
        self.seen.append(repr(response))


def _rag(text: str, reply: Any, **options: Any) -> tuple[GuardedRAG, threading.Event, list[str]]:
    """A speculative GuardedRAG whose chain answers ``text`` (a real prompt, chat model and parser)
    and whose detector gives ``reply`` once the chain has started; the chain's inputs are listed."""
    started, calls = threading.Event(), []

    def mark(inputs: dict[str, Any]) -> dict[str, Any]:
        calls.append(inputs["question"])
        started.set()
        return inputs

    def verdict(_question: str) -> Any:
        assert started.wait(WAIT), "the chain did not start before the verdict"
        return reply

    chain = RunnableLambda(mark) | rag_prompt() | FakeListChatModel(responses=[text] * 5) | StrOutputParser()
    guard = Guard(detector=ScriptedDetector(verdict), **options)
    retriever = RunnableLambda(lambda _q: list(DOCS))
    return GuardedRAG(retriever=retriever, chain=chain, guard=guard, speculative=True), started, calls


def test_in_scope_invoke_releases_the_chains_answer() -> None:
    rag, _, calls = _rag(ANSWER, "in_scope")
    out = rag.invoke(QUESTION)
    assert (out["action"], out["answer"]) == (Action.ANSWERED, ANSWER)
    assert calls == [QUESTION]


def test_out_of_scope_drops_the_answer_before_anyone_sees_it() -> None:
    rag, _, _ = _rag(SECRET, "out_of_scope", policy="clarify")
    handler = _Everything()
    out = rag.invoke(QUESTION, {"callbacks": [handler]})
    assert out["action"] == Action.CLARIFIED and SECRET not in repr(out)
    assert not any(SECRET in seen for seen in handler.seen)
    (record,) = [meta for name, meta in handler.runs if name == SPECULATION_RUN_NAME]
    assert record["scopeguard_speculation"] == "discarded"
    assert record["scopeguard_discarded_seconds"] >= 0 and record["scopeguard_discarded_tokens"] >= 0


def test_a_failing_check_fails_closed_without_the_held_answer() -> None:
    rag, _, _ = _rag(SECRET, DetectionError("detector backend is down"), policy="refuse")
    handler = _Everything()
    out = rag.invoke(QUESTION, {"callbacks": [handler]})
    assert out["failed_closed"] is True and out["action"] == Action.REFUSED
    assert SECRET not in repr(out) and not any(SECRET in seen for seen in handler.seen)


def test_stream_holds_the_chunks_until_the_verdict_then_streams_them() -> None:
    rag, _, _ = _rag(ANSWER, "in_scope")
    chunks = list(rag.stream(QUESTION))
    assert chunks[0]["verdict"].label == "in_scope"
    answers = [c["answer"] for c in chunks if "answer" in c]
    assert len(answers) > 1 and "".join(answers) == ANSWER  # FakeListChatModel streams per character


def test_flag_takes_the_held_answer_instead_of_running_the_chain_again() -> None:
    rag, _, calls = _rag(ANSWER, "out_of_scope", policy="flag")
    out = rag.invoke(QUESTION)
    assert (out["action"], out["answer"]) == (Action.FLAGGED, ANSWER)
    assert calls == [QUESTION]


async def test_async_out_of_scope_stream_shows_nothing_of_the_answer_in_its_events() -> None:
    rag, _, _ = _rag(SECRET, "out_of_scope", policy="refuse")
    events = [event async for event in rag.astream_events(QUESTION, version="v2")]
    assert not any(SECRET in repr(event) for event in events)
    (last,) = [e for e in events if e["event"] == "on_chain_end" and e["name"] == "GuardedRAG"]
    assert last["data"]["output"]["action"] == Action.REFUSED


async def test_async_in_scope_invoke_and_stream_release_the_answer() -> None:
    rag, _, _ = _rag(ANSWER, "in_scope")
    out = await rag.ainvoke(QUESTION)
    assert out["answer"] == ANSWER
    rag, _, _ = _rag(ANSWER, "in_scope")
    answers = [c["answer"] async for c in rag.astream(QUESTION) if "answer" in c]
    assert "".join(answers) == ANSWER


def test_the_guards_langchain_llm_answers_outside_the_callers_trace() -> None:
    """Without a chain the guard's LLM answers; a LangChain chat model called on the speculative
    thread must not pick up the caller's run (and its callbacks) from the context."""
    llm = FakeListChatModel(responses=[SECRET] * 3)
    guard = Guard(detector=ScriptedDetector(["out_of_scope"]), policy="refuse", llm=llm)
    rag = GuardedRAG(retriever=RunnableLambda(lambda _q: list(DOCS)), guard=guard, speculative=True)
    handler = _Everything()
    out = rag.invoke(QUESTION, {"callbacks": [handler]})
    for thread in threading.enumerate():  # the dropped answer's thread runs to its end: wait for it
        if thread.name == "scopeguard-speculative":
            thread.join(WAIT)
    assert out["action"] == Action.REFUSED
    assert not any(SECRET in seen for seen in handler.seen)
