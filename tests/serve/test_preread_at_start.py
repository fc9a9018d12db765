"""``scopeguard serve --preread CORPUS``: the server answers at once, reads the corpus in the
background through its reading queue and between checks, and ``/readyz`` and ``/metrics`` say how
far it got (a scripted reader that keeps what it read: no model)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx

from scopeguard.client import GuardClient
from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.errors import ConfigurationError
from scopeguard.serve import ServeConfig, load_config
from scopeguard.testing import ScriptedPrefixScorer, running_guard_server
from tests.serve.conftest import PARIS

CORPUS = [f"Record {i}: the Brindlewick pier was painted in {1900 + i} by crew {i}." for i in range(10)]


def corpus_folder(root: Path) -> Path:
    folder = root / "corpus"
    folder.mkdir()
    for i, text in enumerate(CORPUS):
        (folder / f"record-{i:02d}.txt").write_text(text, encoding="utf-8")
    return folder


def wait_for(url: str, until: Callable[[dict[str, Any]], bool], seconds: float = 60) -> dict[str, Any]:
    """``/readyz``'s body once ``until`` holds for it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = httpx.get(f"{url}/readyz")
        if r.status_code == 200 and until(r.json()):
            return dict(r.json())
        time.sleep(0.02)
    raise AssertionError(f"/readyz never got there: {httpx.get(f'{url}/readyz').text}")


def test_the_corpus_is_read_in_the_background_while_checks_are_served(
    tmp_path: Path, reading_detector: Any
) -> None:
    scorer = ScriptedPrefixScorer(lambda prompt: -5.0, read_seconds=0.3)  # 10 documents: 3 s at least
    reading_detector("prefix-reading", lambda: LogProbDetector(reader=scorer))  # behind the reading queue
    config = ServeConfig(detector="prefix-reading", port=0, preread=corpus_folder(tmp_path))
    with running_guard_server(config) as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}  # at once, models or not
        status = wait_for(url, lambda body: body["preread"]["read"] >= 1)["preread"]
        assert status["corpus"] == str(config.preread) and status["documents"] == len(CORPUS)
        assert status["done"] is False and status["error"] is None
        assert "seconds" not in status and "bytes_on_disk" not in status  # what it cost: once done
        started = time.perf_counter()
        check = httpx.post(f"{url}/v1/check", json={"question": "Is it Paris?", "documents": [PARIS]})
        assert check.status_code == 200 and time.perf_counter() - started < 2.0
        assert wait_for(url, lambda body: True)["preread"]["done"] is False  # served while it runs
        metrics = httpx.get(f"{url}/metrics").text
        assert 'scopeguard_preread_documents{state="total"} 10.0' in metrics
        assert "scopeguard_preread_running 1.0" in metrics
        done = wait_for(url, lambda body: body["preread"]["done"])["preread"]
        assert (done["read"], done["passages"], done["error"]) == (len(CORPUS), len(CORPUS), None)
        assert done["seconds"] > 0 and done["bytes_on_disk"] == 0  # the scripted reader keeps nothing on disk
        metrics = httpx.get(f"{url}/metrics").text
        assert 'scopeguard_preread_documents{state="read"} 10.0' in metrics
        assert "scopeguard_preread_running 0.0" in metrics
        # the server knows them now: asked again, nothing is read
        with GuardClient(url) as client:
            assert client.preread(CORPUS[:2]) == 0
        again = httpx.post(f"{url}/v1/preread", json={"documents": CORPUS[:2]}).json()
        assert again == {"read": 0, "kept": 2, "passages": 0}
    assert sorted(d for d in CORPUS if any(d in prefix for prefix in scorer.reads)) == sorted(CORPUS)


def test_without_preread_readyz_says_none_and_a_bad_corpus_is_refused_or_reported(tmp_path: Path) -> None:
    with running_guard_server(ServeConfig(detector="lexical", port=0)) as url:
        assert wait_for(url, lambda body: True)["preread"] is None
        assert "scopeguard_preread_running 0.0" in httpx.get(f"{url}/metrics").text
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(overrides={"preread": tmp_path / "missing"}, environ={})
    empty = tmp_path / "empty"
    empty.mkdir()
    with running_guard_server(ServeConfig(detector="lexical", port=0, preread=empty)) as url:
        status = wait_for(url, lambda body: body["preread"]["done"])["preread"]
        assert status["documents"] == 0 and "has no .txt or .md files" in status["error"]


def test_a_client_prereads_through_the_server(lexical_server: str) -> None:
    with GuardClient(lexical_server) as client:
        assert client.preread([]) == 0
        job = client.preread_in_background(["A note about harbours.", "A note about quarries."])
        assert job.wait(30) and job.read == 2 and job.result == 0  # lexical reads nothing ahead
        assert job.report is not None and (job.report.passages, job.report.documents) == (0, 2)
        again = httpx.post(f"{lexical_server}/v1/preread", json={"documents": ["A note about harbours."]})
        assert again.json() == {"read": 0, "kept": 1, "passages": 0}  # the server recorded it
