"""``scopeguard serve --calibration DIR``: the served detector's verdicts come from the profile,
``/readyz`` and ``/metrics`` name it, a hedged verdict shows in the check API and the proxy, and a
profile made for another detector stops the start with one line (scripted detector: no model)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx
from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.errors import ConfigurationError
from scopeguard.serve import ServeConfig, _telemetry, create_app, load_config
from scopeguard.testing import FakeOpenAIServer, ScriptedDetector, calibration_profile, running_guard_server
from tests.serve.conftest import ANSWER, PARIS

# P(out of scope) by question; the scripted detector's own threshold is 0.5, the profile's 0.6
SCORES = {"Is it hedged?": 0.55, "Is it out?": 0.8, "Is it clear?": 0.1}


def _detector() -> ScriptedDetector:
    return ScriptedDetector(lambda q: SCORES.get(q, 0.1))  # the warm-up checks get 0.1


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # threshold 0.6, hedged from 0.4
    return calibration_profile(budget=0.05, folder=tmp_path_factory.mktemp("calibration"))


@pytest.fixture(scope="module")
def server(profile: Path, upstream: FakeOpenAIServer) -> Iterator[str]:
    config = ServeConfig(detector="lexical", port=0, calibration=profile, upstream=upstream.base_url)
    with running_guard_server(config, detector=_detector()) as url:
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        yield url


def test_readyz_and_metrics_name_the_profile(server: str, profile: Path) -> None:
    ready = httpx.get(f"{server}/readyz").json()
    assert ready["status"] == "ready" and ready["detector"] == "scripted"
    named = ready["calibration"]
    assert named["path"] == str(profile) and named["detector"] == "scripted"
    assert (named["threshold"], named["hedge_from"], named["budget"]) == (0.6, 0.4, 0.05)
    assert named["summary"].startswith("scripted at threshold 0.600")
    metrics = httpx.get(f"{server}/metrics").text
    assert 'scopeguard_calibration_threshold{budget="0.05",detector="scripted"} 0.6' in metrics


def test_the_check_api_relabels_and_shows_the_hedge(server: str) -> None:
    def check(question: str) -> dict[str, object]:
        r = httpx.post(f"{server}/v1/check", json={"question": question, "documents": [PARIS]})
        assert r.status_code == 200
        return dict(r.json())

    hedged = check("Is it hedged?")  # out of scope at the detector's own 0.5
    assert (hedged["label"], hedged["hedge"], hedged["score"]) == ("in_scope", True, 0.55)
    assert (check("Is it out?")["label"], check("Is it clear?")["hedge"]) == ("out_of_scope", False)
    batch = httpx.post(
        f"{server}/v1/check/batch", json={"items": [{"question": "Is it hedged?", "documents": [PARIS]}]}
    ).json()
    assert batch["verdicts"][0]["hedge"] is True
    assert "scopeguard_hedged_total 2.0" in httpx.get(f"{server}/metrics").text


def test_the_proxy_forwards_a_hedged_question_and_says_so(server: str, upstream: FakeOpenAIServer) -> None:
    def chat(question: str) -> httpx.Response:
        body = {"model": "m", "messages": [{"role": "user", "content": question}], "documents": [PARIS]}
        return httpx.post(f"{server}/v1/chat/completions", json=body, timeout=30)

    before = upstream.chat_requests
    hedged = chat("Is it hedged?")
    assert hedged.status_code == 200 and hedged.json()["choices"][0]["message"]["content"] == ANSWER
    assert upstream.chat_requests == before + 1
    assert (
        hedged.headers["x-scopeguard-verdict"] == "in_scope"
        and hedged.headers["x-scopeguard-hedge"] == "true"
    )
    guard = hedged.json()["scopeguard"]
    assert guard["verdict"]["hedge"] is True and guard["action"] == "answered"
    clear = chat("Is it clear?")
    assert (
        "x-scopeguard-hedge" not in clear.headers and clear.json()["scopeguard"]["verdict"]["hedge"] is False
    )
    out = chat("Is it out?")
    assert out.headers["x-scopeguard-verdict"] == "out_of_scope" and upstream.chat_requests == before + 2


def test_without_a_profile_readyz_says_none() -> None:
    with running_guard_server(ServeConfig(detector="lexical", port=0, preload=False)) as url:
        deadline = time.monotonic() + 30
        while (ready := httpx.get(f"{url}/readyz")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        expected = {"status": "ready", "detector": "lexical", "calibration": None, "preread": None}
        assert ready.json() == expected


def test_a_profile_for_another_detector_stops_the_start(tmp_path: Path) -> None:
    other = calibration_profile("fast", folder=tmp_path / "other")
    with pytest.raises(ConfigurationError, match="made for another detector"):
        create_app(ServeConfig(port=0, calibration=other), detector=_detector())
    # the setting comes from the environment (and a config file) like every other
    assert load_config(None, {}, {"SCOPEGUARD_CALIBRATION": str(other)}).calibration == other


def test_the_serve_command_exits_2_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_telemetry, "configure_json_logs", lambda level: None)  # keep pytest's logging
    other = calibration_profile("fast", folder=tmp_path / "other")
    res = CliRunner().invoke(app, ["serve", "--detector", "lexical", "--calibration", str(other)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "made for another detector (detector: profile 'fast', detector 'lexical')" in res.stderr
    res = CliRunner().invoke(app, ["serve", "--detector", "lexical", "--calibration", str(tmp_path / "no")])
    assert res.exit_code == 2 and "no calibration profile at" in res.stderr
