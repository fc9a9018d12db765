from __future__ import annotations

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from llama_index.core.llms import ChatMessage
from llama_index_scopeguard import ScopeGuardLLM

from scopeguard import LLMConnectionError
from scopeguard.testing import ScriptedChatModel


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


def test_errors_surface():
    llm = ScopeGuardLLM(chat_model=ScriptedChatModel([LLMConnectionError("server down")]))
    with pytest.raises(LLMConnectionError):
        llm.complete("x")
    with pytest.raises(ValueError, match="valid prefixes"):
        ScopeGuardLLM(chat_model="nosuchbackend:x")


def test_public_surface():
    import llama_index_scopeguard

    assert all(hasattr(llama_index_scopeguard, name) for name in llama_index_scopeguard.__all__)
    assert {"GuardedQueryEngine", "ScopeGuardPostprocessor", "ScopeGuardLLM"} <= set(
        llama_index_scopeguard.__all__
    )
