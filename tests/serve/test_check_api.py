"""The check-only API over HTTP against a real server (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx

from scopeguard.detection.detectors import get_detector
from scopeguard.serve import ServeConfig
from scopeguard.testing import running_guard_server
from tests.serve.conftest import ANSWER, IN_SCOPE, OUT_OF_SCOPE, PARIS


@pytest.fixture(scope="module")
def client(lexical_server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=lexical_server, timeout=30) as c:
        yield c


def test_check_returns_the_cli_json_verdict(client: httpx.Client) -> None:
    r = client.post("/v1/check", json={"question": IN_SCOPE, "documents": [PARIS]})
    assert r.status_code == 200
    local = get_detector("lexical").detect(IN_SCOPE, [PARIS]).model_dump(mode="json")
    remote = r.json()
    assert remote.keys() == local.keys()  # what `scopeguard check --json` prints
    assert {k: v for k, v in remote.items() if k != "latency_ms"} == {
        k: v for k, v in local.items() if k != "latency_ms"
    }
    assert r.headers["x-request-id"]
    took = float(r.headers["server-timing"].removeprefix("app;dur="))  # the server's own milliseconds
    assert 0.0 < took < r.elapsed.total_seconds() * 1000


def test_check_out_of_scope_and_document_objects(client: httpx.Client) -> None:
    docs = [{"text": PARIS, "id": "paris", "metadata": {"source": "wiki"}}]
    verdict = client.post("/v1/check", json={"question": OUT_OF_SCOPE, "documents": docs}).json()
    assert verdict["label"] == "out_of_scope"
    assert "football" in verdict["uncovered"]


def test_batch_keeps_the_order(client: httpx.Client) -> None:
    items = [{"question": q, "documents": [PARIS]} for q in (IN_SCOPE, OUT_OF_SCOPE, IN_SCOPE)]
    r = client.post("/v1/check/batch", json={"items": items})
    assert r.status_code == 200
    assert [v["label"] for v in r.json()["verdicts"]] == ["in_scope", "out_of_scope", "in_scope"]


def test_answer_uses_the_upstream_llm_or_the_policy(client: httpx.Client) -> None:
    inside = client.post("/v1/answer", json={"question": IN_SCOPE, "documents": [PARIS]}).json()
    assert (inside["action"], inside["response"], inside["failed_closed"]) == ("answered", ANSWER, False)
    outside = client.post("/v1/answer", json={"question": OUT_OF_SCOPE, "documents": [PARIS]}).json()
    assert outside["action"] == "clarified" and "football" in outside["response"]
    verdict_only = client.post(
        "/v1/answer", json={"question": IN_SCOPE, "documents": [PARIS], "generate": False}
    ).json()
    assert (verdict_only["action"], verdict_only["response"]) == ("answered", None)


def test_detectors_health_ready_docs(client: httpx.Client) -> None:
    listed = client.get("/v1/detectors").json()
    assert "fast" in listed["detectors"] and listed["active"] == "lexical" and listed["policy"] == "clarify"
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    schema = client.get("/openapi.json").json()
    assert {"/v1/check", "/v1/check/batch", "/v1/answer", "/v1/preread", "/v1/chat/completions"} <= set(
        schema["paths"]
    )
    assert client.get("/docs").status_code == 200


def test_preread_without_a_reading_stage_keeps_what_it_saw(client: httpx.Client) -> None:
    first = client.post("/v1/preread", json={"documents": [PARIS, "Another document."]}).json()
    assert first == {"read": 2, "kept": 0, "passages": 0}  # lexical has no reading model
    again = client.post("/v1/preread", json={"documents": [PARIS]}).json()
    assert again == {"read": 0, "kept": 1, "passages": 0}


def test_bad_input_is_a_422_without_a_trace(client: httpx.Client) -> None:
    broken = client.post("/v1/check", content=b'{"question": ', headers={"content-type": "application/json"})
    assert broken.status_code == 422 and broken.json()["error"]["type"] == "invalid_request"
    empty = client.post("/v1/check", json={"question": "  ", "documents": [PARIS]})
    assert empty.status_code == 422 and "question is empty" in empty.json()["error"]["message"]
    missing = client.post("/v1/check", json={"question": IN_SCOPE})
    assert missing.status_code == 422 and "documents" in missing.json()["error"]["message"]
    for r in (broken, empty, missing):
        assert "Traceback" not in r.text


def test_metrics_count_requests_and_verdicts(client: httpx.Client) -> None:
    client.post("/v1/check", json={"question": OUT_OF_SCOPE, "documents": [PARIS]})
    text = client.get("/metrics").text
    for name in (
        'scopeguard_requests_total{route="/v1/check",status="200"}',
        'scopeguard_verdicts_total{label="out_of_scope",stage="lexical"}',
        'scopeguard_check_seconds_count{detector="lexical"}',
        "scopeguard_queue_depth ",
        "scopeguard_reading_queue_depth ",
        "scopeguard_fail_closed_total",
    ):
        assert name in text, name


@pytest.mark.slow
def test_fast_detector_over_http_matches_in_process() -> None:
    """MiniLM loads once at start-up (``/readyz``); the verdict equals an in-process check."""
    with running_guard_server(ServeConfig(detector="fast", port=0)) as url, httpx.Client(base_url=url) as c:
        remote = c.post("/v1/check", json={"question": IN_SCOPE, "documents": [PARIS]}).json()
        while (ready := c.get("/readyz")).status_code == 503:  # the start-up load may still run
            assert ready.json()["error"]["message"] == "loading the models"
            time.sleep(0.1)
        assert ready.json() == {"status": "ready", "detector": "fast", "calibration": None, "preread": None}
    local = get_detector("fast").detect(IN_SCOPE, [PARIS])
    assert (remote["label"], remote["detector"]) == (local.label, "fast")
    assert remote["score"] == pytest.approx(local.score, abs=1e-6)


@pytest.mark.slow
async def test_default_detector_reads_through_one_queue_and_keeps_what_it_read() -> None:
    """The 1.1 GB reading model loads once; pre-read documents are not read again; concurrent
    checks that escalate to the reading stage share its one thread and all get verdicts."""
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    import asyncio

    doc = (
        "The Alderby harbour council approved a new breakwater in 2019. The works were funded by the "
        "regional ferry operator and finished in 2021."
    )
    questions = ["Who funded the breakwater works in Alderby?", "What colour is the Alderby lighthouse?"]
    with running_guard_server(ServeConfig(detector="default", port=0, deadline=240)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=300) as c:
            while (ready := await c.get("/readyz")).status_code != 200:  # a failed load fails here
                assert ready.json()["error"]["message"] == "loading the models", ready.text
                await asyncio.sleep(0.2)
            first = (await c.post("/v1/preread", json={"documents": [doc]})).json()
            again = (await c.post("/v1/preread", json={"documents": [doc]})).json()
            replies = await asyncio.gather(
                *(c.post("/v1/check", json={"question": q, "documents": [doc]}) for q in questions)
            )
            metrics = (await c.get("/metrics")).text
    assert first["read"] == 1 and again == {"read": 0, "kept": 1, "passages": 0}
    verdicts = [r.json() for r in replies]
    assert all(r.status_code == 200 for r in replies)
    assert all(v["label"] in ("in_scope", "out_of_scope") and v["error"] is None for v in verdicts)
    assert "scopeguard_reading_queue_depth 0.0" in metrics
