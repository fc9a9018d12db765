"""``speculative``: the proxy (and ``/v1/answer``'s own LLM) starts the upstream answer beside the
check and holds it until the verdict. The detector answers only once the upstream has been asked,
so the answer really starts before the verdict (events, never timings)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx

from scopeguard.errors import LLMConnectionError
from scopeguard.serve import ServeConfig
from scopeguard.testing import FakeOpenAIServer, ScriptedChatModel, ScriptedDetector, running_guard_server
from tests.serve.conftest import IN_SCOPE, OUT_OF_SCOPE, PARIS

SECRET = "A speculative answer the user must never see"
WAIT = 10.0  # a bound on waiting for an event the test's own flow sets (never reached)


class _Upstream:
    """A fake upstream LLM that answers ``text`` and says when it was asked."""

    def __init__(self, text: str) -> None:
        self.asked = threading.Event()
        self.text = text

    def reply(self, _prompt: str) -> str:
        self.asked.set()
        return self.text


def _after_upstream_asked(upstream: _Upstream, reply: Any) -> Callable[[str], Any]:
    def verdict(_question: str) -> Any:
        assert upstream.asked.wait(WAIT), "the upstream was not asked before the verdict"
        return reply

    return verdict


@pytest.fixture
def serve() -> Iterator[Callable[[str, Any], tuple[str, FakeOpenAIServer]]]:
    """``serve(text, reply)``: a speculative guard server whose upstream answers ``text`` and whose
    detector gives ``reply`` once the upstream was asked; yields its URL and the upstream."""
    stack: list[Any] = []

    def start(text: str, reply: Any) -> tuple[str, FakeOpenAIServer]:
        upstream = _Upstream(text)
        fake = FakeOpenAIServer(ScriptedChatModel(upstream.reply)).start()
        stack.append(fake)
        config = ServeConfig(
            port=0, upstream=fake.base_url, upstream_model="fake-model", speculative=True, preload=False
        )
        server = running_guard_server(
            config, detector=ScriptedDetector(_after_upstream_asked(upstream, reply))
        )
        stack.append(server)
        return server.__enter__(), fake

    yield start
    for item in reversed(stack):
        if isinstance(item, FakeOpenAIServer):
            item.close()
        else:
            item.__exit__(None, None, None)


def _chat(url: str, question: str, *, stream: bool = False) -> httpx.Response:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": question}],
        "documents": [PARIS],
        "stream": stream,
    }
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)


def _streamed_text(response: httpx.Response) -> str:
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


def _metrics(url: str) -> str:
    return httpx.get(f"{url}/metrics").text


def test_in_scope_forwards_the_held_reply(serve: Any) -> None:
    url, upstream = serve("Paris.", "in_scope")
    reply = _chat(url, IN_SCOPE)
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == "Paris."
    assert reply.json()["scopeguard"]["action"] == "answered"
    assert upstream.chat_requests == 1  # the speculative request is the forwarded one
    assert 'scopeguard_speculative_answers_total{outcome="released",route="proxy"} 1.0' in _metrics(url)


def test_in_scope_stream_is_held_then_relayed_whole(serve: Any) -> None:
    url, upstream = serve("Paris is the capital.", "in_scope")
    reply = _chat(url, IN_SCOPE, stream=True)
    assert reply.status_code == 200
    assert _streamed_text(reply) == "Paris is the capital."
    assert upstream.chat_requests == 1


@pytest.mark.parametrize("stream", [False, True])
def test_out_of_scope_drops_the_reply_and_counts_it(serve: Any, stream: bool) -> None:
    url, upstream = serve(SECRET, "out_of_scope")
    reply = _chat(url, OUT_OF_SCOPE, stream=stream)
    assert reply.status_code == 200
    assert SECRET not in reply.text
    assert reply.headers["x-scopeguard-action"] == "clarified"
    assert upstream.chat_requests == 1  # asked speculatively, then dropped
    metrics = _metrics(url)
    assert 'scopeguard_speculative_answers_total{outcome="discarded",route="proxy"} 1.0' in metrics
    assert "scopeguard_speculative_discarded_seconds_total" in metrics
    assert "scopeguard_speculative_discarded_tokens_total{counted=" in metrics


def test_a_failing_check_fails_closed_without_the_held_reply(serve: Any) -> None:
    url, _ = serve(SECRET, LLMConnectionError("the reader is down", endpoint="http://127.0.0.1:9"))
    reply = _chat(url, IN_SCOPE, stream=True)
    assert SECRET not in reply.text
    assert reply.headers["x-scopeguard-verdict"] == "unknown"
    assert 'scopeguard_speculative_answers_total{outcome="discarded",route="proxy"} 1.0' in _metrics(url)


def test_answer_route_with_the_servers_llm_speculates_too(serve: Any) -> None:
    url, _ = serve("Paris.", "in_scope")
    body = {"question": IN_SCOPE, "documents": [PARIS]}
    result = httpx.post(f"{url}/v1/answer", json=body, timeout=30).json()
    assert result["response"] == "Paris." and result["metadata"]["speculation"] == {"outcome": "released"}
    assert 'scopeguard_speculative_answers_total{outcome="released",route="answer"} 1.0' in _metrics(url)


def test_the_serve_command_passes_speculative_to_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import scopeguard.serve as serve_pkg
    import scopeguard.serve._telemetry as telemetry
    from scopeguard.cli import app

    seen: list[bool] = []
    monkeypatch.setattr(serve_pkg, "run", lambda config, **_: seen.append(config.speculative))
    monkeypatch.setattr(telemetry, "configure_json_logs", lambda level: None)  # the process's logging stays
    runner = CliRunner()
    assert runner.invoke(app, ["serve", "--detector", "lexical", "--speculative"]).exit_code == 0
    assert runner.invoke(app, ["serve", "--detector", "lexical"]).exit_code == 0
    monkeypatch.setenv("SCOPEGUARD_SPECULATIVE", "true")
    assert runner.invoke(app, ["serve", "--detector", "lexical", "--no-speculative"]).exit_code == 0
    assert seen == [True, False, False]
