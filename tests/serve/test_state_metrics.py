"""``/metrics`` reports the reader's kept states (#60 item 2): lookups, hits and their ratio, and the
saved-states folder's bytes and files; absent for a detector that keeps no states (a scripted
reader that keeps what it read: no model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx

from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.serve import ServeConfig
from scopeguard.serve._metrics import Metrics
from scopeguard.testing import ScriptedPrefixScorer, running_guard_server
from tests.serve.conftest import IN_SCOPE, PARIS


def test_the_kept_states_lookups_hits_and_folder_are_scraped(tmp_path: Path, reading_detector: Any) -> None:
    folder = tmp_path / "states"
    folder.mkdir()
    (folder / "model-q8_0-100t-0123456789abcdef01234567.state").write_bytes(bytes(1500))
    scorer = ScriptedPrefixScorer(lambda prompt: -5.0, state_dir=folder)
    reading_detector("prefix-reading", lambda: LogProbDetector(reader=scorer))
    config = ServeConfig(detector="prefix-reading", port=0, preload=False)
    with running_guard_server(config) as url:
        for _ in range(2):  # a new document, then the same one again: its state is kept
            check = httpx.post(f"{url}/v1/check", json={"question": IN_SCOPE, "documents": [PARIS]})
            assert check.status_code == 200, check.text
        metrics = httpx.get(f"{url}/metrics").text
    assert "scopeguard_kept_state_lookups_total 2.0" in metrics
    assert "scopeguard_kept_state_hits_total 1.0" in metrics
    assert "scopeguard_kept_state_hit_ratio 0.5" in metrics
    assert "scopeguard_saved_states_bytes 1500.0" in metrics
    assert "scopeguard_saved_states 1.0" in metrics


def test_a_reader_without_kept_states_reports_none(lexical_server: str) -> None:
    metrics = httpx.get(f"{lexical_server}/metrics").text
    assert "scopeguard_requests" in metrics and "kept_state" not in metrics and "saved_states" not in metrics


def test_a_failing_figure_never_fails_the_scrape() -> None:
    from scopeguard.errors import ConfigurationError

    def broken() -> None:
        raise ConfigurationError("no such folder")

    metrics = Metrics()
    metrics.watch_states(broken)
    body, _ = metrics.render()
    assert b"scopeguard_requests" in body and b"kept_state" not in body
