"""Labels survive a SIGKILL of the review server, and a restart resumes from them."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(review_dir: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scopeguard",
            "review",
            str(review_dir),
            "--annotator",
            "kim",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("review server did not start")


def _post(port: int, payload: dict[str, str]) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/items", timeout=5) as resp:
        token = json.load(resp)["token"]  # the session's write token, as the page gets it
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/label",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "X-Scopeguard-Token": token},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200


def test_labels_survive_sigkill(review_dir: Path) -> None:
    port = _free_port()
    proc = _start(review_dir, port)
    try:
        _post(port, {"question_id": "d1_ins_1", "field": "scope", "value": "in_scope"})
        _post(port, {"question_id": "d1_oos_1", "field": "scope", "value": "out_of_scope"})
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    port = _free_port()
    proc = _start(review_dir, port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/items", timeout=5) as resp:
            labels = json.load(resp)["labels"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert {k: v["scope"] for k, v in labels.items()} == {"d1_ins_1": "in_scope", "d1_oos_1": "out_of_scope"}
    assert not list((review_dir / "reviews").glob("*.tmp"))


def test_calibration_labels_survive_sigkill(tmp_path: Path) -> None:
    from tests.review.chosen_folder import label_rows, write_chosen

    folder = write_chosen(tmp_path / "calibration", 3)
    port = _free_port()
    proc = _start(folder, port)
    try:
        _post(port, {"id": "q1", "label": "in_scope"})
        _post(port, {"id": "q2", "label": "unsure"})
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    port = _free_port()
    proc = _start(folder, port)
    try:
        _post(port, {"id": "q2", "label": "out_of_scope"})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/items", timeout=5) as resp:
            labels = json.load(resp)["labels"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert labels == {"q1": "in_scope", "q2": "out_of_scope"}
    assert [(r["id"], r["label"]) for r in label_rows(folder)] == [("q1", "in_scope"), ("q2", "out_of_scope")]
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
