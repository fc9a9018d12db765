"""The sampling keywords shared by every chat model: defaults filled in once, checked once, and a
wrapper that takes them as one typed set passes on exactly what an explicit signature would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scopeguard.errors import ConfigurationError
from scopeguard.llm._json_schema import with_json_schema
from scopeguard.llm.base import (
    BaseChatModel,
    Completion,
    Prompt,
    check_sampling,
    complete_keywords,
    stream_keywords,
)
from scopeguard.llm.concurrency import AdaptiveLimiter, LimitedChatModel
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.testing import StreamingScriptedChatModel


def test_the_defaults_are_filled_in_where_a_call_leaves_them_out() -> None:
    assert complete_keywords({}) == {"n": 1, "temperature": 0.0, "max_tokens": None, "seed": None}
    assert complete_keywords({"seed": 3, "n": 2}) == {
        "n": 2,
        "temperature": 0.0,
        "max_tokens": None,
        "seed": 3,
    }
    assert stream_keywords({"temperature": 0.5}) == {"temperature": 0.5, "max_tokens": None, "seed": None}


def test_a_keyword_outside_the_set_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="'json_schema'"):
        complete_keywords({"json_schema": {}})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(TypeError, match="'n'"):
        stream_keywords({"n": 2})  # type: ignore[typeddict-unknown-key]


@pytest.mark.parametrize(
    ("n", "temperature", "message"), [(0, 0.0, "n must be >= 1"), (1, -0.1, "temperature")]
)
def test_bad_sampling_is_a_configuration_error(n: int, temperature: float, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        check_sampling(n, temperature)


class _Keywords(BaseChatModel):
    """Records exactly the keywords each ``complete`` call is sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def complete(self, prompt: Prompt, **kwargs: Any) -> Completion:
        self.sent.append(kwargs)
        return Completion(texts=("x",))


ALL = {"n": 1, "temperature": 0.0, "max_tokens": None, "seed": None}


def test_wrappers_pass_every_keyword_on_with_its_default() -> None:
    inner = _Keywords()
    limited = LimitedChatModel(inner, AdaptiveLimiter())
    limited.complete("q", seed=7)
    asyncio.run(limited.acomplete("q", max_tokens=5))
    asyncio.run(inner.acomplete("q"))  # BaseChatModel's: complete in a worker thread
    assert inner.sent == [{**ALL, "seed": 7}, {**ALL, "max_tokens": 5}, ALL]
    with pytest.raises(TypeError, match="'stop'"):
        limited.complete("q", stop=["\n"])  # type: ignore[call-arg]


def test_the_json_schema_wrapper_adds_the_schema_where_the_backend_takes_it() -> None:
    inner = _Keywords()
    inner.supports_json_schema = True  # type: ignore[attr-defined]
    with_json_schema(inner, {"type": "object"}).complete("q", temperature=0.3)
    asyncio.run(with_json_schema(inner, {"type": "object"}).acomplete("q", n=2))
    schema = {"json_schema": {"type": "object"}}
    assert inner.sent == [{**ALL, "temperature": 0.3, **schema}, {**ALL, "n": 2, **schema}]


def test_a_streaming_wrapper_passes_the_stream_keywords_on() -> None:
    model = StreamingScriptedChatModel(["one two"])
    assert "".join(model.stream("q", max_tokens=9)) == "one two"
    assert [(c.n, c.temperature, c.max_tokens, c.seed) for c in model.calls] == [(1, 0.0, 9, None)]


def test_a_request_body_is_checked_and_fills_the_defaults() -> None:
    llm = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", max_tokens=64)
    body = llm.request_body("hi", seed=4)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "max_tokens": 64,
        "seed": 4,
    }
    with pytest.raises(ConfigurationError, match="n must be >= 1"):
        llm.request_body("hi", n=0)
