from __future__ import annotations

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from llama_index.core.llms import ChatMessage
from llama_index_scopeguard import ScopeGuardLLM

from scopeguard import LLMConnectionError
from scopeguard.testing import ScriptedChatModel, StreamingScriptedChatModel


def test_chat_keeps_roles_and_complete_passes_options():
    scripted = ScriptedChatModel(["hello", "done"])
    llm = ScopeGuardLLM(chat_model=scripted, temperature=0.3, max_tokens=8)
    reply = llm.chat(
        [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hi")]
    )
    assert reply.message.content == "hello" and reply.message.role.value == "assistant"
    assert scripted.calls[0].prompt == "Be brief.\nHi"
    assert llm.complete("x").text == "done"
    assert (scripted.calls[1].temperature, scripted.calls[1].max_tokens) == (0.3, 8)
    assert llm.metadata.is_chat_model and llm.metadata.model_name == "scripted"


async def test_async_and_streaming():
    llm = ScopeGuardLLM(chat_model=ScriptedChatModel(["a", "b", "c"]))
    assert (await llm.acomplete("x")).text == "a"
    assert [r.delta async for r in await llm.astream_complete("x")] == ["b"]
    assert [r.delta for r in llm.stream_chat([ChatMessage(role="user", content="x")])] == ["c"]


def test_streams_token_by_token_from_a_streaming_model():
    scripted = StreamingScriptedChatModel(["one two three", "four five"])
    llm = ScopeGuardLLM(chat_model=scripted, temperature=0.2)
    chunks = list(llm.stream_chat([ChatMessage(role="user", content="count")]))
    assert [c.delta for c in chunks] == ["one ", "two ", "three"]
    assert chunks[-1].message.content == "one two three" and chunks[-1].message.role.value == "assistant"
    completions = list(llm.stream_complete("more"))
    assert [c.delta for c in completions] == ["four ", "five"] and completions[-1].text == "four five"
    assert scripted.calls[1].temperature == 0.2


async def test_async_streams_token_by_token():
    llm = ScopeGuardLLM(chat_model=StreamingScriptedChatModel(["a b c", "d e"]))
    chunks = [c async for c in await llm.astream_chat([ChatMessage(role="user", content="x")])]
    assert [c.delta for c in chunks] == ["a ", "b ", "c"] and chunks[-1].message.content == "a b c"
    completions = [c async for c in await llm.astream_complete("y")]
    assert [c.delta for c in completions] == ["d ", "e"] and completions[-1].text == "d e"


def test_errors_surface():
    llm = ScopeGuardLLM(chat_model=ScriptedChatModel([LLMConnectionError("server down")]))
    with pytest.raises(LLMConnectionError):
        llm.complete("x")
    with pytest.raises(ValueError, match="valid prefixes"):
        ScopeGuardLLM(chat_model="nosuchbackend:x")


def test_public_surface():
    import llama_index_scopeguard

    assert all(hasattr(llama_index_scopeguard, name) for name in llama_index_scopeguard.__all__)
    assert {"GuardedQueryEngine", "ScopeGuardPostprocessor", "ScopeGuardPrereader", "ScopeGuardLLM"} <= set(
        llama_index_scopeguard.__all__
    )


def test_standard_params_build_a_spec_and_check_an_instance():
    from pydantic import ValidationError

    from scopeguard.llm.openai_compat import OpenAIChatModel

    llm = ScopeGuardLLM(chat_model="openai:gpt-a", model="gpt-b", api_key="sk-test", max_retries=1, timeout=9)
    assert isinstance(llm.chat_model, OpenAIChatModel)
    assert (llm.chat_model.name, llm.chat_model.max_attempts, llm.chat_model.api_key) == (
        "gpt-b",
        2,
        "sk-test",
    )
    assert "sk-test" not in repr(llm)
    with pytest.raises(ValidationError, match="model='other' \\(it is 'scripted'\\)"):
        ScopeGuardLLM(chat_model=ScriptedChatModel(["x"]), model="other")


@pytest.mark.parametrize("call", ["complete", "stream_chat"])
def test_timeout_bounds_each_call(call: str):
    import time

    from scopeguard.errors import LLMTimeoutError
    from scopeguard.testing import FakeOpenAIServer

    with FakeOpenAIServer(ScriptedChatModel(["late"]), latency=5.0) as server:
        llm = ScopeGuardLLM(chat_model=f"openai:fake?base_url={server.base_url}", api_key="k", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(LLMTimeoutError):
            if call == "complete":
                llm.complete("hi")
            else:
                list(llm.stream_chat([ChatMessage(role="user", content="hi")]))
        assert time.monotonic() - started < 4.0  # not 5 s of latency, not 4 attempts of it
