from __future__ import annotations

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_scopeguard import GuardedRAG, ScopeGuardChatModel, rag_prompt
from lc_testkit import IN_SCOPE

from scopeguard import Action, Guard, LLMConnectionError
from scopeguard.testing import ScriptedChatModel


def test_messages_roles_stop_and_usage():
    scripted = ScriptedChatModel(["Paris. STOP more text"])
    model = ScopeGuardChatModel(llm=scripted, temperature=0.2, max_tokens=16)
    msg = model.invoke([SystemMessage("Be brief."), HumanMessage("Capital of France?")], stop=["STOP"])
    assert isinstance(msg, AIMessage) and msg.content == "Paris. "
    assert msg.usage_metadata is not None and msg.usage_metadata["output_tokens"] == 4
    (call,) = scripted.calls
    assert call.prompt == "Be brief.\nCapital of France?"
    assert (call.temperature, call.max_tokens) == (0.2, 16)


async def test_async_uses_acomplete():
    scripted = ScriptedChatModel(["one", "two"])
    model = ScopeGuardChatModel(llm=scripted)
    assert (await model.ainvoke("hi")).content == "one"
    assert [c.content async for c in model.astream("hi")] == ["two"]


def test_errors_surface_and_bad_spec_is_named():
    model = ScopeGuardChatModel(llm=ScriptedChatModel([LLMConnectionError("server down")]))
    with pytest.raises(LLMConnectionError):
        model.invoke("hi")
    with pytest.raises(ValueError, match="valid prefixes"):  # pydantic wraps ConfigurationError
        ScopeGuardChatModel(llm="nosuchbackend:x")


@pytest.mark.slow
@pytest.mark.integration
def test_real_local_llm_answers_a_guarded_question(faiss_retriever, local_chat_model):
    chain = rag_prompt() | ScopeGuardChatModel(llm=local_chat_model, max_tokens=24) | StrOutputParser()
    rag = GuardedRAG(retriever=faiss_retriever, chain=chain, guard=Guard(detector="lexical"))
    out = rag.invoke(IN_SCOPE)
    assert out["action"] == Action.ANSWERED
    assert "1887" in out["answer"]
