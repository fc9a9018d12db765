"""DeferringChatModel: a cache miss is noted in the wave (sync and async), a hit is served."""

from __future__ import annotations

import asyncio

import pytest

from scopeguard.batch import Deferred, Wave
from scopeguard.generation.batch import DeferringChatModel
from scopeguard.generation.cache import RecordingChatModel, ReplyCache, UsageLedger
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.testing import ScriptedChatModel


def test_a_miss_is_deferred_sync_and_async_and_a_hit_is_served() -> None:
    llm = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")  # never reached
    judge = OpenAIChatModel("j", base_url="http://127.0.0.1:9/v1")
    cache, wave = ReplyCache(), Wave({}, attempts=2)
    model = DeferringChatModel(llm, cache, wave=wave, step="answer")

    with pytest.raises(Deferred):
        model.call("q", temperature=0.5, max_tokens=7)
    ((key, (sent_to, body)),) = wave.requests.items()
    assert sent_to is llm and body == llm.request_body("q", temperature=0.5, max_tokens=7)
    assert not model.ledger.by_step  # nothing booked for a deferred request

    # the views keep the class, the wave and the occurrence count: the judge's identical request
    # is the 2nd occurrence, so another key; async defers the same way
    judged = model.sharing(judge, step="judge")
    assert isinstance(judged, DeferringChatModel) and judged.wave is wave
    with pytest.raises(Deferred):
        asyncio.run(judged.acall("q", temperature=0.5, max_tokens=7))
    assert len(wave.requests) == 2 and wave.requests[next(iter(wave.requests.keys() - {key}))][0] is judge

    # the next wave: the batch wrote the reply into the cache; a fresh per-item model replays it
    cache.put(key, {"id": "r-1", "texts": ["answer"], "batch": True})
    replay = DeferringChatModel(llm, cache, wave=Wave({}, attempts=2), step="answer")
    reply = replay.for_step("answer", UsageLedger()).call("q", temperature=0.5, max_tokens=7)
    assert (reply.text, reply.cached) == ("answer", False)  # a batch reply was paid for: booked as new


def test_a_failed_request_gives_up_after_its_attempts() -> None:
    llm = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    model = DeferringChatModel(llm, ReplyCache(), wave=Wave({}, attempts=1))
    with pytest.raises(Deferred):
        model.call("q")
    (key,) = model.wave.requests
    again = DeferringChatModel(llm, ReplyCache(), wave=Wave({key: (1, "boom")}, attempts=1))
    with pytest.raises(Exception, match="failed 1 times"):
        again.call("q")


def test_a_recording_model_sends_a_miss_to_the_wrapped_model_sync_and_async() -> None:
    cache = ReplyCache()
    rec = RecordingChatModel(ScriptedChatModel(["one", "two"]), cache)
    assert (rec.call("q").text, asyncio.run(rec.acall("q")).text) == ("one", "two")
    replay = RecordingChatModel(ScriptedChatModel([]), cache).for_step("s")
    assert type(replay) is RecordingChatModel
    assert [asyncio.run(replay.acall("q")).text, replay.call("q").text] == ["one", "two"]
    assert replay.ledger.by_step["s"].cached == 2
