"""Spans per request and per stage through the OpenTelemetry API (a recording provider stands in
for an application's SDK), and the metrics a scrape sees."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx

from scopeguard.serve import ServeConfig
from scopeguard.serve._telemetry import span
from scopeguard.testing import FakeOpenAIServer, running_guard_server
from tests.serve.conftest import IN_SCOPE, OUT_OF_SCOPE, PARIS

trace = pytest.importorskip("opentelemetry.trace", reason="needs opentelemetry-api")


class _Recorded(trace.NonRecordingSpan):  # type: ignore[misc,name-defined]
    def __init__(self, name: str, log: list[_Recorded]) -> None:
        super().__init__(trace.INVALID_SPAN_CONTEXT)
        self.name, self.attributes = name, {}
        log.append(self)

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value


class _Tracer(trace.Tracer):  # type: ignore[misc,name-defined]
    def __init__(self, log: list[_Recorded]) -> None:
        self.log = log

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> _Recorded:
        return _Recorded(name, self.log)

    @contextmanager
    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any) -> Iterator[_Recorded]:
        yield _Recorded(name, self.log)


class _Provider(trace.TracerProvider):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        self.spans: list[_Recorded] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> _Tracer:
        return _Tracer(self.spans)


@pytest.fixture(scope="module")
def provider() -> _Provider:
    recording = _Provider()
    trace.set_tracer_provider(recording)  # once per process: the API allows no second one
    return recording


def test_spans_per_request_and_stage(provider: _Provider, upstream: FakeOpenAIServer) -> None:
    config = ServeConfig(detector="lexical", port=0, upstream=upstream.base_url)
    with running_guard_server(config) as url:
        body = {"model": "m", "messages": [{"role": "user", "content": IN_SCOPE}], "documents": [PARIS]}
        assert httpx.post(f"{url}/v1/chat/completions", json=body).status_code == 200
        httpx.post(f"{url}/v1/check", json={"question": OUT_OF_SCOPE, "documents": [PARIS]})
    names = [s.name for s in provider.spans]
    assert {"scopeguard.request", "scopeguard.check", "scopeguard.upstream"} <= set(names)
    checks = [s.attributes for s in provider.spans if s.name == "scopeguard.check"]
    assert {c["scopeguard.label"] for c in checks} == {"in_scope", "out_of_scope"}
    requests = [s.attributes for s in provider.spans if s.name == "scopeguard.request"]
    assert {"/v1/chat/completions", "/v1/check"} <= {r["scopeguard.route"] for r in requests}
    assert all(r.get("scopeguard.status") == 200 for r in requests if r["scopeguard.route"] == "/v1/check")


def test_the_reading_stage_has_its_own_span(provider: _Provider) -> None:
    from scopeguard.serve._runtime import ReadingLane

    lane = ReadingLane()
    with span("scopeguard.check"):
        assert lane.run(lambda text: len(text), "passage") == 7
    lane.close()
    (read,) = [s for s in provider.spans if s.name == "scopeguard.read"]
    assert read.attributes["scopeguard.queued_ms"] >= 0


def test_a_discarded_speculative_answer_is_traced_with_its_cost(
    provider: _Provider, upstream: FakeOpenAIServer
) -> None:
    from scopeguard.testing import ScriptedDetector

    config = ServeConfig(port=0, upstream=upstream.base_url, speculative=True, preload=False)
    with running_guard_server(config, detector=ScriptedDetector(lambda _q: "out_of_scope")) as url:
        body = {"model": "m", "messages": [{"role": "user", "content": OUT_OF_SCOPE}], "documents": [PARIS]}
        assert httpx.post(f"{url}/v1/chat/completions", json=body).status_code == 200
    (dropped,) = [s.attributes for s in provider.spans if s.name == "scopeguard.speculative"]
    assert dropped["scopeguard.outcome"] == "discarded"
    assert dropped["scopeguard.discarded_seconds"] >= 0
    assert dropped["scopeguard.counted"] in ("tokens", "chunks")
    assert isinstance(dropped["scopeguard.discarded_tokens"], int)
