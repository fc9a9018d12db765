"""Speculative answers: the guard's answer starts beside the check and waits for its verdict.

Control flow is pinned with events, never timings: the detector waits until the answer has
started (so the answer really began before the verdict), and, where a test counts the cost of a
dropped answer, until the speculative thread has ended.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from scopeguard import Action, Document, Guard, LLMConnectionError, ScopeGuardError, Verdict
from scopeguard._speculation import AsyncHeldAnswer, HeldAnswer, Tally
from scopeguard.llm.base import Completion
from scopeguard.testing import ScriptedChatModel, ScriptedDetector

DOC = Document(id="d1", text="The Kestrel ferry carries 180 passengers and crosses in 35 minutes.")
SECRET = "SPECULATIVE ANSWER the user must never see"
ANSWER = "35 minutes."
WAIT = 10.0  # a bound on waiting for an event that the test's own flow sets (never reached)


def _speculative_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "scopeguard-speculative"]


def _after_answer_started(started: threading.Event, reply: Any, *, until_ended: bool = False) -> Any:
    """A detector script: the verdict comes once the answer has started (and, with ``until_ended``,
    once the speculative thread has ended, so that its cost is all counted)."""

    def verdict(_question: str) -> Any:
        assert started.wait(WAIT), "the answer did not start before the verdict"
        if until_ended:
            for thread in _speculative_threads():
                thread.join(WAIT)
        return reply

    return verdict


def _llm(started: threading.Event, text: str) -> ScriptedChatModel:
    def reply(_prompt: str) -> str:
        started.set()
        return text

    return ScriptedChatModel(reply)


def _responder(started: threading.Event, text: str, calls: list[str] | None = None) -> Any:
    """A responder that says when it started, answers ``text`` and lists the questions it got."""

    def responder(question: str, documents: Sequence[Document]) -> str:
        if calls is not None:
            calls.append(question)
        started.set()
        return text

    return responder


def test_in_scope_answer_starts_before_the_verdict_and_is_released_unchanged() -> None:
    started = threading.Event()
    plain = Guard(detector=ScriptedDetector(["in_scope"]), llm=ScriptedChatModel([ANSWER]))
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(started, "in_scope")),
        llm=_llm(started, ANSWER),
        speculative=True,
    )
    expected = plain.answer("How long is the crossing?", [DOC])
    result = guard.answer("How long is the crossing?", [DOC])
    assert (
        (result.action, result.response) == (expected.action, expected.response) == (Action.ANSWERED, ANSWER)
    )
    assert result.metadata["speculation"] == {"outcome": "released"}
    assert "speculation" not in expected.metadata


def test_out_of_scope_discards_the_answer_and_counts_its_cost(caplog: pytest.LogCaptureFixture) -> None:
    started = threading.Event()
    llm = _llm(started, SECRET)
    detector = ScriptedDetector(_after_answer_started(started, "out_of_scope", until_ended=True))
    guard = Guard(detector=detector, policy="refuse", llm=llm, speculative=True)
    with caplog.at_level(logging.DEBUG):
        result = guard.answer("Who built the shipyard?", [DOC])
    plain = Guard(detector=ScriptedDetector(["out_of_scope"]), policy="refuse").answer(
        "Who built the shipyard?", [DOC]
    )
    assert (result.action, result.response) == (plain.action, plain.response)
    assert llm.requests == 1  # the speculative answer was asked for, then dropped
    cost = result.metadata["speculation"]
    assert cost["outcome"] == "discarded" and cost["finished"] is True
    assert (cost["tokens"], cost["counted"]) == (len(SECRET.split()), "tokens")  # the LLM's own count
    assert cost["seconds"] >= 0.0
    assert SECRET not in result.model_dump_json() and SECRET not in caplog.text
    assert "discarded a speculative answer" in caplog.text


def test_a_failing_check_fails_closed_and_nothing_speculative_leaks(caplog: pytest.LogCaptureFixture) -> None:
    started = threading.Event()
    boom = LLMConnectionError("endpoint refused", endpoint="http://127.0.0.1:9")
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(started, boom, until_ended=True)),
        llm=_llm(started, SECRET),
        speculative=True,
    )
    with caplog.at_level(logging.DEBUG):
        result = guard.answer("How long is the crossing?", [DOC])
    assert result.failed_closed and result.verdict.label == "unknown"
    assert result.action is Action.CLARIFIED
    assert result.metadata["speculation"]["outcome"] == "discarded"
    assert SECRET not in result.model_dump_json() and SECRET not in caplog.text


def test_a_check_that_raises_under_raise_drops_the_answer() -> None:
    started, gate = threading.Event(), threading.Event()

    def reply(_prompt: str) -> str:
        started.set()
        gate.wait(WAIT)
        return SECRET

    boom = LLMConnectionError("endpoint refused", endpoint="http://127.0.0.1:9")
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(started, boom)),
        llm=ScriptedChatModel(reply),
        on_error="raise",
        speculative=True,
    )
    with pytest.raises(ScopeGuardError, match="endpoint refused"):
        guard.answer("How long is the crossing?", [DOC])
    gate.set()


def test_speculative_per_call_overrides_the_guard() -> None:
    guard = Guard(
        detector=ScriptedDetector(["in_scope", "in_scope"]), llm=ScriptedChatModel([ANSWER, ANSWER])
    )
    assert "speculation" not in guard.answer("How long?", [DOC]).metadata
    assert guard.answer("How long?", [DOC], speculative=True).metadata["speculation"]["outcome"] == "released"


def test_the_flag_policy_takes_the_held_responder_answer_instead_of_asking_again() -> None:
    started, calls = threading.Event(), []
    responder = _responder(started, ANSWER, calls)
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(started, "out_of_scope")),
        policy="flag",
        speculative=True,
    )
    result = guard.answer("Who built the shipyard?", [DOC], responder=responder)
    assert (result.action, result.response) == (Action.FLAGGED, ANSWER)
    assert calls == ["Who built the shipyard?"]
    assert result.metadata["speculation"] == {"outcome": "released"}


def test_a_hedged_verdict_adds_the_caveat_to_the_held_responder_answer() -> None:
    started = threading.Event()
    hedged = Verdict(label="in_scope", score=0.4, hedge=True)
    guard = Guard(detector=ScriptedDetector(_after_answer_started(started, hedged)), speculative=True)
    responder = _responder(started, ANSWER)
    result = guard.answer("How long?", [DOC], responder=responder)
    assert result.action is Action.HEDGED and result.response is not None
    assert result.response.startswith(ANSWER) and "may not fully cover" in result.response


# -- async ---------------------------------------------------------------------------------------


class _HangingLLM:
    """An async LLM whose answer never comes: a speculative answer that can only be cancelled."""

    name = "hanging"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = False

    def complete(self, prompt: Any, **sampling: Any) -> Completion:
        raise AssertionError("the async guard calls acomplete")

    async def acomplete(self, prompt: Any, **sampling: Any) -> Completion:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


async def test_async_in_scope_releases_the_answer_unchanged() -> None:
    started = threading.Event()
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(started, "in_scope")),
        llm=_llm(started, ANSWER),
        speculative=True,
    )
    plain = await Guard(detector=ScriptedDetector(["in_scope"]), llm=ScriptedChatModel([ANSWER])).aanswer(
        "How long?", [DOC]
    )
    result = await guard.aanswer("How long?", [DOC])
    assert (result.action, result.response) == (plain.action, plain.response)
    assert result.metadata["speculation"] == {"outcome": "released"}


async def test_async_out_of_scope_cancels_the_answer() -> None:
    llm = _HangingLLM()
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(llm.started, "out_of_scope")),
        policy="refuse",
        llm=llm,
        speculative=True,
    )
    result = await guard.aanswer("Who built the shipyard?", [DOC])
    assert result.action is Action.REFUSED
    cost = result.metadata["speculation"]
    assert cost["outcome"] == "discarded" and cost["finished"] is False
    assert (cost["tokens"], cost["counted"]) == (0, "chunks")
    for _ in range(10):  # the cancellation reaches the LLM call at the loop's next turns
        if llm.cancelled:
            break
        await asyncio.sleep(0)
    assert llm.cancelled


async def test_async_failing_check_fails_closed_with_the_flag_policy_too() -> None:
    started = threading.Event()
    boom = LLMConnectionError("endpoint refused", endpoint="http://127.0.0.1:9")
    responder = _responder(started, SECRET)
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(started, boom)), policy="refuse", speculative=True
    )
    result = await guard.aanswer("How long?", [DOC], responder=responder)
    assert result.failed_closed and result.action is Action.REFUSED
    assert SECRET not in result.model_dump_json()


async def test_async_flag_policy_takes_the_held_responder_answer() -> None:
    started = threading.Event()
    responder = _responder(started, ANSWER)
    guard = Guard(
        detector=ScriptedDetector(_after_answer_started(started, "out_of_scope")),
        policy="flag",
        speculative=True,
    )
    result = await guard.aanswer("Who built the shipyard?", [DOC], responder=responder)
    assert (result.action, result.response) == (Action.FLAGGED, ANSWER)


# -- the held answer itself --------------------------------------------------------------------


def test_a_held_stream_is_held_until_released_then_continues() -> None:
    made, more = threading.Event(), threading.Event()

    def produce(tally: Tally) -> Iterator[str]:
        yield "Hello "
        yield "there"
        made.set()
        more.wait(WAIT)
        yield "!"

    held = HeldAnswer(produce)
    assert made.wait(WAIT)  # two chunks made, none handed over yet
    assert held.tally.chunks == 2 and not held.released
    chunks = held.release()
    assert [next(chunks), next(chunks)] == ["Hello ", "there"]
    more.set()
    assert list(chunks) == ["!"]


def test_a_discarded_stream_stops_at_its_next_chunk() -> None:
    made, more = threading.Event(), threading.Event()
    produced: list[str] = []

    def produce(tally: Tally) -> Iterator[str]:
        for piece in ("a", "b", "c", "d"):
            produced.append(piece)
            yield piece
            if piece == "a":
                made.set()
                more.wait(WAIT)

    held = HeldAnswer(produce)
    assert made.wait(WAIT)
    cost = held.discard()
    more.set()
    assert held.join(WAIT)
    assert produced == ["a", "b"]  # stopped at the chunk after the discard
    assert (cost.tokens, cost.counted, cost.finished) == (1, "chunks", False)


def test_a_released_answer_raises_its_own_error() -> None:
    def produce(tally: Tally) -> list[str]:
        raise LLMConnectionError("down", endpoint="http://127.0.0.1:9")

    with pytest.raises(LLMConnectionError, match="down"):
        HeldAnswer(produce).result()


async def test_an_async_held_stream_is_held_until_released() -> None:
    made = asyncio.Event()

    async def produce(tally: Tally) -> Any:
        yield "Hello "
        yield "there"
        tally.add_tokens(2)
        made.set()

    held = AsyncHeldAnswer(produce)
    await made.wait()
    assert held.tally.chunks == 2 and held.tally.tokens == 2
    assert [c async for c in held.release()] == ["Hello ", "there"]
