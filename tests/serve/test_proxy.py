"""The guarded OpenAI-compatible proxy, driven by the official ``openai`` client (sync, async,
streaming) against a real server and a fake upstream LLM; upstream faults fail closed."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx
import openai

from scopeguard.serve import ServeConfig
from scopeguard.testing import FakeOpenAIServer, ScriptedChatModel, running_guard_server
from tests.serve.conftest import ANSWER, IN_SCOPE, OUT_OF_SCOPE, PARIS

DOCS = {"documents": [PARIS]}


def ask(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer from the documents."},
        {"role": "user", "content": question},
    ]


@pytest.fixture(scope="module")
def client(lexical_server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{lexical_server}/v1", api_key="unused", max_retries=0)


def test_in_scope_goes_upstream_and_the_verdict_rides_along(
    client: openai.OpenAI, upstream: FakeOpenAIServer
) -> None:
    before = upstream.chat_requests
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-x", messages=ask(IN_SCOPE), extra_body=DOCS
    )
    reply = raw.parse()
    assert reply.choices[0].message.content == ANSWER
    assert reply.model == "fake-model"  # --upstream-model replaced the request's model
    assert raw.headers["x-scopeguard-verdict"] == "in_scope"
    assert reply.model_extra is not None
    assert reply.model_extra["scopeguard"]["action"] == "answered"
    assert upstream.chat_requests == before + 1


def test_out_of_scope_answers_with_the_policy_without_the_upstream(
    client: openai.OpenAI, upstream: FakeOpenAIServer
) -> None:
    before = upstream.chat_requests
    reply = client.chat.completions.create(model="gpt-x", messages=ask(OUT_OF_SCOPE), extra_body=DOCS)
    assert "football" in (reply.choices[0].message.content or "")
    assert reply.model_extra is not None
    guard = reply.model_extra["scopeguard"]
    assert (guard["verdict"]["label"], guard["action"], guard["failed_closed"]) == (
        "out_of_scope",
        "clarified",
        False,
    )
    assert upstream.chat_requests == before


async def test_async_client(lexical_server: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{lexical_server}/v1", api_key="unused", max_retries=0)
    inside = await client.chat.completions.create(model="m", messages=ask(IN_SCOPE), extra_body=DOCS)
    outside = await client.chat.completions.create(model="m", messages=ask(OUT_OF_SCOPE), extra_body=DOCS)
    assert inside.choices[0].message.content == ANSWER
    assert outside.model_extra is not None and outside.model_extra["scopeguard"]["action"] == "clarified"
    await client.close()


def test_streaming_relays_the_upstream_chunks(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(model="m", messages=ask(IN_SCOPE), stream=True, extra_body=DOCS)
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    assert (
        chunks[0].model_extra is not None
        and chunks[0].model_extra["scopeguard"]["verdict"]["label"] == "in_scope"
    )
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_streaming_the_policy_response(lexical_server: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{lexical_server}/v1", api_key="unused", max_retries=0)
    stream = await client.chat.completions.create(
        model="m", messages=ask(OUT_OF_SCOPE), stream=True, extra_body=DOCS
    )
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "football" in text and chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[0].model_extra is not None and chunks[0].model_extra["scopeguard"]["action"] == "clarified"
    await client.close()


def test_documents_are_required(client: openai.OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError, match="documents"):
        client.chat.completions.create(model="m", messages=ask(IN_SCOPE))


# -- faults: the upstream is down, stalls or sends garbage ------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def stalling() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(ScriptedChatModel(lambda prompt: ANSWER), latency=5.0) as server:
        yield server


@pytest.fixture(scope="module")
def garbage() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(ScriptedChatModel(lambda prompt: ANSWER), garbage=True) as server:
        yield server


def _faulty(upstream_url: str, deadline: float) -> Iterator[str]:
    config = ServeConfig(detector="lexical", port=0, upstream=upstream_url, deadline=deadline)
    with running_guard_server(config) as url:
        yield url


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("fault", ["down", "stalling", "garbage"])
def test_upstream_faults_fail_closed_and_the_server_stays_up(
    fault: str, stream: bool, stalling: FakeOpenAIServer, garbage: FakeOpenAIServer
) -> None:
    upstream_url = {
        "down": f"http://127.0.0.1:{_free_port()}/v1",
        "stalling": stalling.base_url,
        "garbage": garbage.base_url,
    }[fault]
    # a short deadline for the stall; a longer one where the retries of a refused connection fit
    for url in _faulty(upstream_url, 1.0 if fault == "stalling" else 10.0):
        body = {"model": "m", "messages": ask(IN_SCOPE), "stream": stream, **DOCS}
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
        if fault == "garbage" and stream:
            # the first chunk was fine, so the stream had started: the error ends the stream
            assert r.status_code == 200
            assert '"type": "upstream_error"' in r.text and "[DONE]" not in r.text
            assert '"kind": "bad_reply"' in r.text
        else:
            expected = 504 if fault == "stalling" else 502
            assert r.status_code == expected, r.text
            error = r.json()
            assert error["error"]["type"] == ("deadline_exceeded" if expected == 504 else "upstream_error")
            kind = {"down": "upstream", "stalling": "timeout", "garbage": "bad_reply"}[fault]
            assert error["error"]["kind"] == kind, error
            assert error["scopeguard"]["failed_closed"] is True
            assert error["scopeguard"]["action"] == "refused"
            assert "Traceback" not in r.text
        assert httpx.get(f"{url}/healthz").status_code == 200
        metrics = httpx.get(f"{url}/metrics").text
        assert 'scopeguard_fail_closed_total{reason="' in metrics


# -- a stream is bounded: an idle upstream, or one that runs past the stream's deadline ---------
@pytest.fixture(scope="module")
def slow_stream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(ScriptedChatModel(lambda prompt: ANSWER), stream_gap=0.4) as server:
        yield server


@pytest.mark.parametrize(
    ("limits", "error_type", "reason"),
    [
        ({"stream_idle_timeout": 0.15}, "stream_idle_timeout", "idle"),
        ({"stream_idle_timeout": 5.0, "stream_deadline": 1.0}, "stream_deadline_exceeded", "deadline"),
    ],
)
def test_a_stream_past_its_limits_ends_with_an_error_event_naming_the_limit(
    slow_stream: FakeOpenAIServer, limits: dict[str, float], error_type: str, reason: str
) -> None:
    assert len(ANSWER.split()) >= 4  # enough gaps for the deadline to fall inside the stream
    config = ServeConfig(detector="lexical", port=0, upstream=slow_stream.base_url, deadline=10.0, **limits)
    with running_guard_server(config) as url:
        body = {"model": "m", "messages": ask(IN_SCOPE), "stream": True, **DOCS}
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as r:
            assert r.status_code == 200
            events = [line[len("data: ") :] for line in r.iter_lines() if line.startswith("data: ")]
        assert "[DONE]" not in events
        assert '"scopeguard"' in events[0]  # the stream had started: the verdict rode on its first chunk
        error = json.loads(events[-1])["error"]
        assert error["type"] == error_type and error["kind"] == "timeout", error
        assert len(events) < len(ANSWER.split()) + 2  # cut before the upstream's last chunk
        metrics = httpx.get(f"{url}/metrics").text
        assert f'scopeguard_streams_cut_total{{reason="{reason}"}} 1.0' in metrics
        assert httpx.get(f"{url}/healthz").status_code == 200
