"""LangChain's own standard tests (``langchain-tests``) for ScopeGuardChatModel, and its streaming.

The suites run with LangChain's own default standard parameters (``timeout=60``,
``max_retries=2``, ...). They run on scripted scopeguard models
(``scopeguard.testing.ScriptedChatModel``), where the adapter is what is under test: the unit
suite uses a model that cannot stream (one chunk), the integration suite one that streams word by
word; and once on the real packaged SmolLM2 through ``llm="local:smollm2"`` (slow).
"""

from __future__ import annotations

import time
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

from scopeguard.errors import LLMTimeoutError
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


@pytest.mark.slow
@pytest.mark.integration
class TestScopeGuardChatModelLocal(_Suite, ChatModelIntegrationTests):
    """The standard suite on a real llama.cpp model, built from a spec with the default params."""

    @pytest.fixture(autouse=True)
    def _needs_smollm2(self, smollm2_path: Any) -> None:
        pass

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"llm": "local:smollm2", "max_tokens": 16}  # short replies: the suite, not the model


@pytest.fixture(scope="session")
def smollm2_path() -> Any:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard.errors import ModelError
    from scopeguard.models import local_gguf

    try:
        return local_gguf("smollm2")
    except ModelError as exc:
        pytest.skip(str(exc))


def test_settings_that_contradict_a_model_instance_are_a_clear_error():
    from scopeguard.llm.openai_compat import OpenAIChatModel

    remote = OpenAIChatModel("gpt-a", api_key="sk-own", max_attempts=4)
    with pytest.raises(ValidationError, match="api_key \\(it has a key of its own\\): a model instance"):
        ScopeGuardChatModel(llm=remote, api_key="sk-other")
    with pytest.raises(ValidationError, match="max_retries=1 \\(it makes 4 attempts\\)"):
        ScopeGuardChatModel(llm=remote, max_retries=1)
    with pytest.raises(ValidationError, match="model='other' \\(it is 'm1'\\)"):
        ScopeGuardChatModel(llm=ScriptedChatModel(_reply, model="m1"), model="other")
    assert ScopeGuardChatModel(llm=remote, api_key="sk-own", max_retries=3, model="gpt-a").llm is remote


def test_a_spec_string_is_built_with_the_standard_params():
    from scopeguard.llm.openai_compat import OpenAIChatModel

    chat = ScopeGuardChatModel(
        llm="openai:gpt-a?timeout=7", model="gpt-b", api_key="sk-test", max_retries=2, timeout=30
    )
    assert isinstance(chat.llm, OpenAIChatModel)
    assert (chat.llm.name, chat.llm.max_attempts, chat.llm.timeout) == ("gpt-b", 3, 7.0)
    assert chat.llm.api_key == "sk-test"
    assert "sk-test" not in repr(chat) and chat.timeout == 30
    with pytest.raises(ValidationError, match="max_attempts 4 and max_retries 0"):
        ScopeGuardChatModel(llm="openai:gpt-a?max_attempts=4", api_key="k", max_retries=0)
    local = ScopeGuardChatModel(llm="local:smollm2", api_key="any", max_retries=2)
    assert local.llm.name == "SmolLM2-135M-Instruct.Q4_1"  # a local model needs no key, retries nothing


def test_timeout_bounds_each_call_retries_included():
    from scopeguard.testing import FakeOpenAIServer

    with FakeOpenAIServer(ScriptedChatModel(_reply), latency=5.0) as server:
        chat = ScopeGuardChatModel(llm=f"openai:fake?base_url={server.base_url}", api_key="k", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(LLMTimeoutError):
            chat.invoke("hi")
        assert time.monotonic() - started < 4.0  # not 5 s of latency, not 4 attempts of it


def test_streamed_usage_from_a_local_model_is_on_the_last_chunk(smollm2_path: Any):
    chat = ScopeGuardChatModel(llm="local:smollm2", max_tokens=12, timeout=60, max_retries=2)
    chunks = list(chat.stream("Say hello."))
    whole = chat.invoke("Say hello.")
    last = chunks[-1]
    assert last.chunk_position == "last" and last.usage_metadata is not None
    assert last.usage_metadata == whole.usage_metadata  # as the non-streaming path reports it
    assert last.usage_metadata["input_tokens"] > 5 and last.usage_metadata["output_tokens"] > 0
    assert all(c.usage_metadata is None for c in chunks[:-1])
