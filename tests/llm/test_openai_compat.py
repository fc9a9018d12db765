"""The OpenAI-compatible backend: the real SDK against a scripted HTTP transport, a dead port,
and the real llama.cpp server."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from scopeguard.errors import (
    ConfigurationError,
    DocumentTooLongError,
    LLMConnectionError,
    LLMError,
    LLMResponseError,
)
from scopeguard.llm.openai_compat import OpenAIChatModel, from_spec_arg


def _reply(n: int, text: str = "hello") -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": f"{text} {i}"}, "finish_reason": "stop"}
            for i in range(n)
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2 * n, "total_tokens": 5 + 2 * n},
    }


def _model(
    handler: Callable[[httpx.Request], httpx.Response], **kw: Any
) -> tuple[OpenAIChatModel, list[dict]]:
    seen: list[dict] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return handler(request)

    client = openai.OpenAI(
        api_key="k",
        base_url="http://mock.local/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(record)),  # type: ignore[arg-type]
    )
    return OpenAIChatModel("m", client=client, backoff=0.01, max_backoff=0.02, **kw), seen


def test_n_samples_in_one_request() -> None:
    llm, seen = _model(lambda r: httpx.Response(200, json=_reply(json.loads(r.content).get("n", 1))))
    c = llm.complete("hi", n=3, temperature=0.7, max_tokens=9, seed=1)
    assert c.texts == ("hello 0", "hello 1", "hello 2") and c.requests == 1
    assert seen[0]["n"] == 3 and seen[0]["temperature"] == 0.7 and seen[0]["max_tokens"] == 9
    assert seen[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert c.prompt_tokens == 5 and c.completion_tokens == 6 and c.finish_reasons == ("stop",) * 3


def test_extra_body_is_merged_into_the_json_a_request_sends() -> None:
    llm, seen = _model(lambda r: httpx.Response(200, json=_reply(1)), extra_body={"top_k": 5, "min_p": 0.1})
    assert llm.complete("hi").texts == ("hello 0",)
    assert seen[0] == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
        "top_k": 5,
        "min_p": 0.1,
    }
    # a request's own extra_body (the log-prob verdicts' options) wins over the model's
    reply = llm.chat_completion({"messages": [{"role": "user", "content": "x"}], "extra_body": {"top_k": 1}})
    assert reply.choices[0].message.content == "hello 0" and seen[1]["top_k"] == 1 and "min_p" not in seen[1]


def test_server_ignoring_n_falls_back_to_separate_requests_and_n_does_not_stick() -> None:
    llm, seen = _model(lambda r: httpx.Response(200, json=_reply(1)))
    c = llm.complete("hi", n=3, seed=10)
    assert len(c.texts) == 3 and c.requests == 3
    assert [s.get("n") for s in seen] == [3, None, None]
    assert [s.get("seed") for s in seen] == [10, 11, 12]
    llm.complete("again")
    assert "n" not in seen[-1]  # a later call asks for one sample again


def test_default_max_tokens_applies_only_when_the_call_gives_none() -> None:
    llm, seen = _model(lambda r: httpx.Response(200, json=_reply(1)), max_tokens=50)
    llm.complete("a")
    llm.complete("b", max_tokens=7)
    assert [s["max_tokens"] for s in seen] == [50, 7]


def test_retries_429_and_5xx_then_succeeds() -> None:
    statuses = iter([429, 503])

    def handler(r: httpx.Request) -> httpx.Response:
        status = next(statuses, 200)
        return httpx.Response(status, json=_reply(1) if status == 200 else {"error": {"message": "busy"}})

    llm, seen = _model(handler)
    assert llm.complete("hi").text == "hello 0"
    assert len(seen) == 3


def test_persistent_5xx_gives_up_after_max_attempts() -> None:
    llm, seen = _model(lambda r: httpx.Response(500, json={"error": {"message": "boom"}}), max_attempts=3)
    with pytest.raises(LLMError, match="HTTP 500"):
        llm.complete("hi")
    assert len(seen) == 3


def test_client_errors_are_not_retried() -> None:
    llm, seen = _model(lambda r: httpx.Response(404, json={"error": {"message": "no such model"}}))
    with pytest.raises(LLMError, match="does not know the model 'm'"):
        llm.complete("hi")
    assert len(seen) == 1


def test_context_overflow_is_document_too_long() -> None:
    msg = "Requested tokens (5000) exceed context window of 4096"
    llm, _ = _model(lambda r: httpx.Response(400, json={"error": {"message": msg}}))
    with pytest.raises(DocumentTooLongError) as info:
        llm.complete("long")
    assert info.value.n_tokens == 5000 and info.value.limit == 4096


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_endpoint_names_the_url_after_two_quick_attempts() -> None:
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    llm = OpenAIChatModel("m", base_url=url, backoff=0.01)
    with pytest.raises(LLMConnectionError) as info:
        llm.complete("hi")
    assert info.value.endpoint == url and url in str(info.value)
    assert "2 attempts" in str(info.value)


async def test_async_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    with pytest.raises(LLMConnectionError, match=r"127\.0\.0\.1"):
        await OpenAIChatModel("m", base_url=url, backoff=0.01).acomplete("hi")


def test_spec_needs_a_model_and_a_key_or_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ConfigurationError, match="model name"):
        from_spec_arg("")
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        from_spec_arg("gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    llm = from_spec_arg("qwen")
    assert llm.base_url == "http://127.0.0.1:8080/v1" and llm.model == "qwen"
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert from_spec_arg("gpt-4o-mini").base_url.startswith("https://api.openai.com")


@pytest.mark.slow
@pytest.mark.integration
def test_real_llama_cpp_server_sync_and_n_fallback(llama_server: str) -> None:
    llm = OpenAIChatModel("qwen", base_url=llama_server, timeout=300)
    c = llm.complete("Reply with one word: hello.", n=2, temperature=0.8, max_tokens=8, seed=3)
    assert len(c.texts) == 2 and all(isinstance(t, str) for t in c.texts)
    assert c.requests in (1, 2) and c.completion_tokens > 0


@pytest.mark.slow
@pytest.mark.integration
async def test_real_llama_cpp_server_async(llama_server: str) -> None:
    llm = OpenAIChatModel("qwen", base_url=llama_server, timeout=300)
    c = await llm.acomplete("Say OK.", max_tokens=4)
    assert c.text.strip() and c.completion_tokens > 0


def test_choices_are_ordered_by_index_and_odd_usage_is_tolerated() -> None:
    body = _reply(2)
    body["choices"].reverse()
    body["usage"] = None
    llm, _ = _model(lambda r: httpx.Response(200, json=body))
    c = llm.complete("hi", n=2)
    assert c.texts == ("hello 0", "hello 1") and c.prompt_tokens == 0


def test_the_deadline_caps_each_request_timeout() -> None:
    from scopeguard.llm.deadline import deadline

    timeouts: list[float] = []

    def handler(r: httpx.Request) -> httpx.Response:
        timeouts.append(r.extensions["timeout"]["read"])
        return httpx.Response(200, json=_reply(1))

    llm, _ = _model(handler, timeout=60.0)
    llm.complete("a")
    with deadline(5.0):
        llm.complete("b")
    assert timeouts[0] == 60.0 and 0 < timeouts[1] <= 5.0


# -- the completions endpoint: a raw prompt, the same retries and typed errors ----------------


def _text_reply(text: str = "Yes") -> dict[str, Any]:
    return {
        "id": "x",
        "object": "text_completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": text,
                "finish_reason": "length",
                "logprobs": {
                    "tokens": [text],
                    "token_logprobs": [-0.1],
                    "top_logprobs": [{text: -0.1, "No": -2.5}],
                },
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }


def _text_model(answer: Callable[[httpx.Request], httpx.Response]) -> tuple[OpenAIChatModel, list[dict]]:
    """``_model`` answering only the completions endpoint (404 elsewhere), with an async client on
    the same scripted transport too."""

    def handler(request: httpx.Request) -> httpx.Response:
        return answer(request) if request.url.path == "/v1/completions" else httpx.Response(404)

    async_client = openai.AsyncOpenAI(
        api_key="k",
        base_url="http://mock.local/v1",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),  # type: ignore[arg-type]
    )
    return _model(handler, async_client=async_client)


def test_a_raw_prompt_goes_to_the_completions_endpoint_as_it_is() -> None:
    llm, seen = _text_model(lambda r: httpx.Response(200, json=_text_reply()))
    reply = llm.text_completion({"prompt": "<|im_start|>user\nHi", "max_tokens": 1, "logprobs": 5})
    assert seen[0] == {"model": "m", "prompt": "<|im_start|>user\nHi", "max_tokens": 1, "logprobs": 5}
    assert reply.choices[0].text == "Yes" and reply.usage.prompt_tokens == 7
    assert reply.choices[0].logprobs.top_logprobs[0] == {"Yes": -0.1, "No": -2.5}


async def test_the_async_twin_sends_the_same_request() -> None:
    llm, _ = _text_model(lambda r: httpx.Response(200, json=_text_reply("No")))
    reply = await llm.atext_completion({"prompt": "p", "max_tokens": 1})
    assert reply.choices[0].text == "No"


def test_server_errors_are_retried_like_a_chat_request() -> None:
    replies = iter([httpx.Response(503, json={"error": "busy"}), httpx.Response(200, json=_text_reply())])
    llm, seen = _text_model(lambda r: next(replies))
    assert llm.text_completion({"prompt": "p"}).choices[0].text == "Yes"
    assert len(seen) == 2


@pytest.mark.parametrize(
    "reply",
    [
        {"object": "error", "message": "model not loaded"},
        {"id": "x", "choices": []},
        {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes"}}]},
    ],
)
def test_a_reply_that_is_not_a_text_completion_names_the_endpoint(reply: dict[str, Any]) -> None:
    llm, _ = _text_model(lambda r: httpx.Response(200, json=reply))
    with pytest.raises(
        LLMResponseError, match=r"http://mock.local/v1 sent a reply that is not a text completion"
    ):
        llm.text_completion({"prompt": "p"})
