"""``Guard(llm=<LangChain chat model>)``: scopeguard wraps it with ``from_langchain``."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pydantic import Field

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_scopeguard import LangChainLLM, ScopeGuardChatModel, from_langchain
from lc_testkit import CORPUS, OUT_OF_SCOPE, CoverageDetector

from scopeguard import (
    Action,
    ChatModel,
    ConfigurationError,
    Guard,
    LLMConnectionError,
    MissingDependencyError,
    from_spec,
)
from scopeguard.llm.base import ChatMessage
from scopeguard.testing import ScriptedChatModel

DEFUSED = "The document does not say who the chief engineer of the railway was."


class OptionsFakeChatModel(FakeListChatModel):
    """LangChain's fake list model with the provider fields a real chat model has."""

    temperature: float = 0.7
    max_tokens: int | None = None
    seen: list[tuple[float, int | None, list[str]]] = Field(default_factory=list)

    def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
        self.seen.append((self.temperature, self.max_tokens, [m.type for m in messages]))
        return super()._call(messages, *args, **kwargs)


def test_guard_defuses_with_a_langchain_chat_model() -> None:
    llm = GenericFakeChatModel(messages=iter([AIMessage(content=DEFUSED)]))
    guard = Guard(detector=CoverageDetector(), policy="defuse", llm=llm)
    assert isinstance(guard.llm, LangChainLLM) and isinstance(guard.llm, ChatModel)
    result = guard.answer(OUT_OF_SCOPE, [CORPUS[0]])
    assert result.action == Action.DEFUSED and result.response == DEFUSED


async def test_guard_defuses_async_with_a_langchain_chat_model() -> None:
    llm = FakeListChatModel(responses=[DEFUSED])
    guard = Guard(detector=CoverageDetector(), policy="defuse", llm=llm)
    result = await guard.aanswer(OUT_OF_SCOPE, [CORPUS[0]])
    assert result.action == Action.DEFUSED and result.response == DEFUSED


def test_samples_roles_and_options_reach_the_model() -> None:
    fake = OptionsFakeChatModel(responses=["a", "b", "c"], seen=[])
    llm = from_spec(fake)
    prompt = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hi")]
    out = llm.complete(prompt, n=3, temperature=0.2, max_tokens=16)
    assert sorted(out.texts) == ["a", "b", "c"] and out.requests == 3
    assert {s[:2] for s in fake.seen} == {(0.2, 16)}
    assert fake.seen[0][2] == ["system", "human"]
    assert (fake.temperature, fake.max_tokens) == (0.7, None)  # the user's model is left as configured
    assert llm.name == "langchain:OptionsFakeChatModel"


async def test_async_samples() -> None:
    llm = from_langchain(FakeListChatModel(responses=["x", "y"]))
    out = await llm.acomplete("Hi", n=2)
    assert sorted(out.texts) == ["x", "y"]


def test_provider_errors_become_llm_errors() -> None:
    class Down(FakeListChatModel):
        def _call(self, *args: Any, **kwargs: Any) -> str:
            raise ConnectionError("connection refused")

    with pytest.raises(LLMConnectionError, match="connection refused"):
        from_spec(Down(responses=["never"])).complete("Hi")


def test_a_wrapped_scopeguard_model_is_unwrapped() -> None:
    scripted = ScriptedChatModel(["ok"])
    assert from_spec(ScopeGuardChatModel(llm=scripted)) is scripted


def test_missing_adapter_package_is_named_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_scopeguard", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match="pip install langchain-scopeguard"):
        Guard(detector=CoverageDetector(), policy="defuse", llm=FakeListChatModel(responses=["x"]))


def test_something_else_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="LangChain chat model"):
        Guard(detector=CoverageDetector(), policy="defuse", llm=object())  # type: ignore[arg-type]
