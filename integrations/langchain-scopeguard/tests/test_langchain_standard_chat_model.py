"""LangChain's own standard tests (``langchain-tests``) for ScopeGuardChatModel, and its streaming.

The suites run on scripted scopeguard models (``scopeguard.testing.ScriptedChatModel``): the
adapter is what is under test, not a language model. The unit suite uses a model that cannot
stream (one chunk), the integration suite one that streams word by word.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")
pytest.importorskip("langchain_tests", reason="pip install './integrations/langchain-scopeguard[test]'")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_scopeguard import ScopeGuardChatModel, StreamingChatModel
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests
from pydantic import ValidationError

from scopeguard.testing import ScriptedChatModel, StreamingScriptedChatModel

REPLY = "Hello there! How can I help you today?"


def _reply(prompt: str) -> str:
    return REPLY


class _Suite:
    """What both suites share: the class, what it supports, the standard params it takes."""

    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ScopeGuardChatModel

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        # timeout / max_retries / api_key belong to the wrapped scopeguard model's own
        # configuration; ScopeGuardChatModel rejects them (test_rejects_provider_settings).
        return {"temperature": 0, "max_tokens": 100, "stop": []}

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def supports_model_override(self) -> bool:
        return False  # the scopeguard model is fixed at construction

    @property
    def returns_usage_metadata(self) -> bool:
        return True


class TestScopeGuardChatModelUnit(_Suite, ChatModelUnitTests):
    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"llm": ScriptedChatModel(_reply, model="scripted-unit")}


class TestScopeGuardChatModelIntegration(_Suite, ChatModelIntegrationTests):
    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"llm": StreamingScriptedChatModel(_reply, model="scripted-streaming")}

    @property
    def returns_usage_metadata(self) -> bool:
        return False  # a streamed reply has no token counts (the protocol yields text only)


class _Tokens(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


def test_streams_token_by_token_from_a_streaming_model():
    llm = StreamingScriptedChatModel(_reply)
    assert isinstance(llm, StreamingChatModel) and not isinstance(
        ScriptedChatModel(_reply), StreamingChatModel
    )
    model = ScopeGuardChatModel(llm=llm)
    chunks = [c.content for c in model.stream("hi")]
    assert chunks[:3] == ["Hello ", "there! ", "How "] and "".join(chunks) == REPLY


def test_stream_stops_at_a_stop_sequence_split_across_tokens():
    llm = StreamingScriptedChatModel(lambda _: "one two three four five six")
    model = ScopeGuardChatModel(llm=llm, stop=["ee fo"])
    chunks = list(model.stream("count"))
    assert "".join(str(c.content) for c in chunks) == "one two thr"
    assert chunks[-1].chunk_position == "last"
    assert chunks[-1].response_metadata["finish_reason"] == "stop"
    assert llm.streamed == 4  # stopped reading the model at "four ", not after "six"


async def test_astream_of_a_sync_streaming_model_yields_tokens():
    model = ScopeGuardChatModel(llm=StreamingScriptedChatModel(_reply))
    chunks = [c async for c in model.astream([HumanMessage("hi")])]
    assert len(chunks) > 3 and "".join(str(c.content) for c in chunks) == REPLY


def test_non_streaming_model_streams_one_chunk_with_usage():
    model = ScopeGuardChatModel(llm=ScriptedChatModel(_reply))
    (chunk,) = list(model.stream("hi"))
    assert isinstance(chunk, AIMessageChunk) and chunk.content == REPLY
    assert chunk.usage_metadata is not None and chunk.usage_metadata["output_tokens"] == len(REPLY.split())


def test_streaming_flag_makes_invoke_stream_to_callbacks():
    handler = _Tokens()
    model = ScopeGuardChatModel(llm=StreamingScriptedChatModel(_reply), streaming=True)
    message = model.invoke("hi", config={"callbacks": [handler]})
    assert message.content == REPLY and handler.tokens[:2] == ["Hello ", "there! "]


def test_standard_params_name_the_wrapped_model():
    model = ScopeGuardChatModel(llm=ScriptedChatModel(_reply, model="m1"), max_tokens=7, stop=["x"])
    params = model._get_ls_params()
    assert params["ls_provider"] == "scopeguard" and params["ls_model_name"] == "m1"
    assert (params["ls_max_tokens"], params["ls_stop"], params["ls_temperature"]) == (7, ["x"], 0.0)
    assert model._identifying_params["model"] == "m1"


def test_rejects_provider_settings():
    with pytest.raises(ValidationError, match="api_key"):
        ScopeGuardChatModel(llm=ScriptedChatModel(_reply), api_key="sk-test")
