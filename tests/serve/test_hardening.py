"""Safe to expose: API key, body/document/queue limits, deadlines, SIGTERM, config sources."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx

from scopeguard.errors import ConfigurationError
from scopeguard.serve import ServeConfig, load_config
from scopeguard.testing import FakeOpenAIServer, ScriptedChatModel, ScriptedDetector, running_guard_server
from tests.serve.conftest import ANSWER, IN_SCOPE, PARIS

KEY = "sk-test-0123456789abcdef"
CHECK = {"question": IN_SCOPE, "documents": [PARIS]}


@pytest.fixture(scope="module")
def keyed() -> Iterator[str]:
    config = ServeConfig(detector="lexical", port=0, api_key=KEY, max_documents=3, max_document_chars=500)
    with running_guard_server(config) as url:
        yield url


def test_the_api_key_is_required(keyed: str) -> None:
    missing = httpx.post(f"{keyed}/v1/check", json=CHECK)
    wrong = httpx.post(f"{keyed}/v1/check", json=CHECK, headers={"Authorization": "Bearer nope"})
    right = httpx.post(f"{keyed}/v1/check", json=CHECK, headers={"Authorization": f"Bearer {KEY}"})
    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert missing.json()["error"]["type"] == "unauthorised" and KEY not in wrong.text
    assert httpx.get(f"{keyed}/metrics").status_code == 401
    assert httpx.get(f"{keyed}/healthz").status_code == 200  # probes need no key
    assert httpx.get(f"{keyed}/readyz").status_code == 200


def test_limits_name_themselves(keyed: str) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    big = httpx.post(f"{keyed}/v1/check", content=b"x" * 10_000_000, headers=auth)
    assert big.status_code == 413 and big.json()["error"]["limit"] == "max_body_bytes"
    many = httpx.post(f"{keyed}/v1/check", json={**CHECK, "documents": [PARIS] * 4}, headers=auth)
    assert many.status_code == 422 and many.json()["error"]["limit"] == "max_documents"
    assert "max_documents=3" in many.json()["error"]["message"]
    long = httpx.post(f"{keyed}/v1/check", json={**CHECK, "documents": ["word " * 200]}, headers=auth)
    assert long.status_code == 422 and long.json()["error"]["limit"] == "max_document_chars"


def test_a_chunked_body_over_the_limit_is_a_413(keyed: str) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"x" * 100_000  # 4 MB without a Content-Length

    r = httpx.post(f"{keyed}/v1/check", content=chunks(), headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 413


def _gated_server(**options: object) -> tuple[threading.Event, ScriptedDetector, ServeConfig]:
    gate = threading.Event()

    def slow(question: str) -> str:
        gate.wait(20)
        return "in_scope"

    config = ServeConfig(detector="lexical", port=0, preload=False, **options)  # type: ignore[arg-type]
    return gate, ScriptedDetector(slow), config


def test_a_full_queue_answers_429_with_retry_after() -> None:
    gate, detector, config = _gated_server(queue_size=1)
    with running_guard_server(config, detector=detector) as url:
        first: dict[str, httpx.Response] = {}
        worker = threading.Thread(target=lambda: first.update(r=httpx.post(f"{url}/v1/check", json=CHECK)))
        worker.start()
        while "scopeguard_queue_depth 1.0" not in httpx.get(f"{url}/metrics").text:
            time.sleep(0.02)
        busy = httpx.post(f"{url}/v1/check", json=CHECK)
        assert busy.status_code == 429 and int(busy.headers["retry-after"]) >= 1
        assert busy.json()["error"]["type"] == "queue_full"
        gate.set()
        worker.join()
        assert first["r"].status_code == 200
        assert httpx.post(f"{url}/v1/check", json=CHECK).status_code == 200  # the slot is free again


def test_past_the_deadline_is_a_504_that_fails_closed() -> None:
    gate, detector, config = _gated_server(deadline=0.3)
    with running_guard_server(config, detector=detector) as url:
        r = httpx.post(f"{url}/v1/check", json=CHECK, timeout=30)
        answer = httpx.post(f"{url}/v1/answer", json=CHECK, timeout=30)
        gate.set()
        metrics = httpx.get(f"{url}/metrics").text
    assert r.status_code == 504 and r.json()["error"]["type"] == "deadline_exceeded"
    assert r.json()["error"]["kind"] == "timeout"  # the one error vocabulary, set where it happened
    verdict = r.json()["verdict"]
    assert (
        verdict["label"] == "unknown"
        and "deadline" in verdict["error"]
        and verdict["error_kind"] == "timeout"
    )
    assert answer.status_code == 504
    result = answer.json()["result"]  # no verdict: out of scope, so the policy (clarify) answers
    assert result["failed_closed"] is True and result["action"] == "clarified"
    assert 'scopeguard_fail_closed_total{reason="deadline"} 2.0' in metrics


# -- configuration -----------------------------------------------------------------------------
def test_config_file_then_environment_then_flags(tmp_path: object) -> None:
    from pathlib import Path

    file = Path(str(tmp_path)) / "serve.toml"
    file.write_text('[serve]\ndetector = "fast"\nport = 9000\ndeadline = 5\n', encoding="utf-8")
    env = {"SCOPEGUARD_PORT": "9100", "SCOPEGUARD_API_KEY": KEY}
    config = load_config(file, {"deadline": 7.5, "host": None}, env)
    assert (config.detector, config.port, config.deadline, config.host) == ("fast", 9100, 7.5, "127.0.0.1")
    assert config.api_key is not None and KEY not in repr(config)


def test_a_public_address_needs_a_key() -> None:
    with pytest.raises(ConfigurationError, match="needs an API key"):
        load_config(None, {"host": "0.0.0.0"}, {})
    assert load_config(None, {"host": "0.0.0.0"}, {"SCOPEGUARD_API_KEY": KEY}).host == "0.0.0.0"
    cli = subprocess.run(
        [sys.executable, "-m", "scopeguard", "serve", "--host", "0.0.0.0", "--detector", "lexical"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "SCOPEGUARD_API_KEY"},
    )
    assert cli.returncode == 2 and "needs an API key" in cli.stderr


# -- the real command: SIGTERM lets requests in flight finish, then exits 0 ----------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sigterm_finishes_requests_in_flight_then_exits_0() -> None:
    port = _free_port()
    with FakeOpenAIServer(ScriptedChatModel(lambda prompt: ANSWER), latency=1.5) as upstream:
        command = [sys.executable, "-m", "scopeguard", "serve", "--detector", "lexical", "--port", str(port)]
        command += ["--upstream", upstream.base_url, "--api-key", KEY]
        proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {KEY}"}
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            body = {"model": "m", "messages": [{"role": "user", "content": IN_SCOPE}], "documents": [PARIS]}
            got: dict[str, httpx.Response] = {}
            request = threading.Thread(
                target=lambda: got.update(
                    r=httpx.post(f"{url}/v1/chat/completions", json=body, headers=auth, timeout=30)
                )
            )
            request.start()
            while upstream.in_flight == 0:  # the request has reached the upstream
                time.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            request.join()
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        assert got["r"].status_code == 200 and got["r"].json()["choices"][0]["message"]["content"] == ANSWER
        logs = [json.loads(line) for line in (proc.stderr.read() if proc.stderr else "").splitlines() if line]
    access = [entry for entry in logs if entry.get("route") == "/v1/chat/completions"]
    assert access and access[0]["status"] == 200 and len(access[0]["request_id"]) >= 8
    assert all(KEY not in json.dumps(entry) for entry in logs)  # the key is never logged
