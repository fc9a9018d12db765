"""The streaming protocol: who satisfies it, and the sync-to-async bridge closing early."""

from __future__ import annotations

from collections.abc import Iterator

import scopeguard
from scopeguard import StreamingChatModel
from scopeguard.llm.base import stream_in_thread
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.testing import ScriptedChatModel, StreamingScriptedChatModel


def test_streaming_models_satisfy_the_protocol() -> None:
    assert "StreamingChatModel" in scopeguard.__all__ and "StreamingChatModel" in scopeguard.llm.__all__
    assert isinstance(OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1"), StreamingChatModel)
    assert isinstance(StreamingScriptedChatModel(["x"]), StreamingChatModel)
    assert not isinstance(ScriptedChatModel(["x"]), StreamingChatModel)


def test_scripted_model_streams_its_reply_in_word_pieces() -> None:
    llm = StreamingScriptedChatModel(["Hello there,  world!", "second"])
    assert list(llm.stream("hi", temperature=0.5)) == ["Hello ", "there,  ", "world!"]
    assert llm.streamed == 3 and llm.calls[0].temperature == 0.5


async def test_scripted_model_astream_matches_stream() -> None:
    llm = StreamingScriptedChatModel(lambda prompt: f"echo {prompt}")
    assert [p async for p in llm.astream("a b")] == ["echo ", "a ", "b"]


async def test_stream_in_thread_closes_the_sync_stream_when_stopped_early() -> None:
    closed: list[bool] = []

    def pieces() -> Iterator[str]:
        try:
            yield from ("a", "b", "c")
        finally:
            closed.append(True)

    bridged = stream_in_thread(pieces())
    assert await anext(bridged) == "a"
    await bridged.aclose()  # type: ignore[attr-defined]
    assert closed == [True]
