"""``Guard(llm=<LlamaIndex LLM>)``: scopeguard wraps it with ``from_llama_index``."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pydantic import Field

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import CORPUS, OUT_OF_SCOPE, CoverageDetector
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse, LLMMetadata
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index_scopeguard import LlamaIndexLLM, ScopeGuardLLM, from_llama_index

from scopeguard import (
    Action,
    ChatModel,
    ConfigurationError,
    Guard,
    LLMConnectionError,
    MissingDependencyError,
    from_spec,
)
from scopeguard.llm.base import ChatMessage as SGMessage
from scopeguard.testing import ScriptedChatModel

DEFUSED = "The document does not say who the chief engineer of the railway was."


class RecordingLLM(CustomLLM):
    """A chat LLM with the provider fields a real one has; records what each call saw."""

    reply: str = DEFUSED
    temperature: float = 0.7
    max_tokens: int | None = None
    seen: list[tuple[float, int | None, list[str]]] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True, model_name="recording")

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self.seen.append((self.temperature, self.max_tokens, [m.role.value for m in messages]))
        return ChatResponse(message=ChatMessage(role="assistant", content=self.reply))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("a chat model is asked with chat()")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_guard_defuses_with_a_llama_index_llm() -> None:
    llm = RecordingLLM(seen=[])
    guard = Guard(detector=CoverageDetector(), policy="defuse", llm=llm)
    assert isinstance(guard.llm, LlamaIndexLLM) and isinstance(guard.llm, ChatModel)
    result = guard.answer(OUT_OF_SCOPE, [CORPUS[0]])
    assert result.action == Action.DEFUSED and result.response == DEFUSED
    ((temperature, max_tokens, roles),) = llm.seen
    assert temperature == 0.0 and max_tokens and roles == ["user"]  # the policy's options reached it


def test_guard_defuses_with_mock_llm_and_max_tokens_reaches_it() -> None:
    """MockLLM (a completion model) echoes the prompt, or writes max_tokens words when it has them."""
    guard = Guard(detector=CoverageDetector(), policy="defuse", llm=MockLLM())
    result = guard.answer(OUT_OF_SCOPE, [CORPUS[0]])
    assert result.action == Action.DEFUSED
    assert set((result.response or "").split()) == {"text"}  # the policy's max_tokens reached MockLLM
    out = from_spec(MockLLM()).complete("Hi", n=2, max_tokens=3)
    assert out.texts == ("text text text", "text text text") and out.requests == 2
    assert from_spec(MockLLM()).complete("Hi").text == "Hi"  # no max_tokens: MockLLM echoes the prompt


async def test_async_samples_and_roles() -> None:
    llm = RecordingLLM(seen=[])
    prompt = [SGMessage(role="system", content="Be brief."), SGMessage(role="user", content="Hi")]
    out = await from_spec(llm).acomplete(prompt, n=2, temperature=0.1, max_tokens=8)
    assert out.texts == (DEFUSED, DEFUSED)
    assert llm.seen == [(0.1, 8, ["system", "user"])] * 2
    assert (llm.temperature, llm.max_tokens) == (0.7, None)  # the user's LLM is left as configured
    guard = Guard(detector=CoverageDetector(), policy="defuse", llm=llm)
    result = await guard.aanswer(OUT_OF_SCOPE, [CORPUS[0]])
    assert result.action == Action.DEFUSED and result.response == DEFUSED


def test_provider_errors_become_llm_errors() -> None:
    class Down(RecordingLLM):
        @llm_chat_callback()
        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            raise TimeoutError("read timed out")

    with pytest.raises(LLMConnectionError, match="timed out"):
        from_spec(Down()).complete("Hi")


def test_a_wrapped_scopeguard_model_is_unwrapped() -> None:
    scripted = ScriptedChatModel(["ok"])
    assert from_llama_index(ScopeGuardLLM(chat_model=scripted)) is scripted


def test_missing_adapter_package_is_named_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_index_scopeguard", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match="pip install llama-index-scopeguard"):
        Guard(detector=CoverageDetector(), policy="defuse", llm=MockLLM())


def test_something_else_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="LlamaIndex LLM"):
        Guard(detector=CoverageDetector(), policy="defuse", llm=42)  # type: ignore[arg-type]
