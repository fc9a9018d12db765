"""``scopeguard generate --execution batch`` killed with SIGKILL while a batch is in progress, then
re-run to completion against the fake Batch API server; and the standalone fake server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from scopeguard.batch import BatchJobs
from scopeguard.data import load_dataset
from scopeguard.testing import EloqChatModel, FakeOpenAIServer, invented_document

QUICK = ("validating", "in_progress", "completed")
SLOW = ("validating", *["in_progress"] * 15, "completed")  # ~0.3 s per job at --poll-interval 0.02


def _corpus(folder: Path, n: int = 3) -> Path:
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i:02d}.txt").write_text(invented_document(f"plan-{i}"), encoding="utf-8")
    return folder


def _env(server: FakeOpenAIServer) -> dict[str, str]:
    path = os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-fake"}


def _command(corpus: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "scopeguard",
        "generate",
        str(corpus),
        "--out",
        str(out),
        "--llm",
        "openai:gpt-4o-mini",
        "--mode",
        "efficient",
        "--execution",
        "batch",
        "--poll-interval",
        "0.02",
        "--no-progress",
    ]


def _dataset(out: Path) -> tuple[str, str]:
    return (out / "documents.jsonl").read_text(), (out / "questions.jsonl").read_text()


def test_sigkill_during_a_batch_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    with FakeOpenAIServer(EloqChatModel(model="gpt-4o-mini"), batch_statuses=QUICK) as server:
        env = _env(server)
        whole = subprocess.run(
            _command(corpus, tmp_path / "whole"), env=env, capture_output=True, text=True, timeout=300
        )
        assert whole.returncode == 0, whole.stdout + whole.stderr
        requests = set(server.submitted)
        server.submitted.clear()

        out = tmp_path / "out"
        server.batch_statuses = SLOW  # a batch stays in_progress for a while: the kill lands there
        proc = subprocess.Popen(
            _command(corpus, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        second = out / ".batch" / "job-00002.json"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if second.is_file() and json.loads(second.read_text())["status"] == "in_progress":
                break
            if proc.poll() is not None:
                raise AssertionError(
                    f"generate exited early: {proc.stdout.read().decode() if proc.stdout else ''}"
                )
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = BatchJobs(out).states()
        assert [s.closed for s in killed] == [True, False], "the kill should land in the second job"
        assert killed[-1].status == "in_progress" and not (out / "questions.jsonl").exists()

        server.batch_statuses = QUICK
        rerun = subprocess.run(_command(corpus, out), env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert "3 done (3 this run, 0 resumed)" in rerun.stdout

        assert sorted(load_dataset(out).documents) == ["doc00", "doc01", "doc02"]
        assert _dataset(out) == _dataset(tmp_path / "whole")
        assert set(server.submitted) == requests and max(server.submitted.values()) == 1
        states = BatchJobs(out).states()
        assert all(s.closed and s.cleaned for s in states) and server.files == {}


def _post(base_url: str, prompt: str) -> dict[str, Any]:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        reply: dict[str, Any] = json.loads(response.read())
    return reply


def test_the_standalone_fake_server_serves_until_interrupted(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "scopeguard._fake_openai", "--port", "0", "--latency", "0.01"],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        judge = "Document: a plan.\nQuestion: Why?\nThe answer is: Yes or No"
        reply = _post(base_url, judge)
        assert reply["model"] == "gpt-4o-mini" and reply["choices"][0]["message"]["content"].endswith("Yes")
        try:  # a prompt the ELOQ-shaped model does not know is a clear 400, and the server goes on
            _post(base_url, "Say something.")
            raise AssertionError("expected a 400")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400 and "unexpected prompt" in exc.read().decode()
        assert _post(base_url, judge)["choices"]
        assert proc.poll() is None  # still serving
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    assert proc.returncode == 0


def test_the_standalone_fake_server_refuses_a_non_final_status_list() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "scopeguard._fake_openai", "--batch-statuses", "validating"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "batch_statuses must end with one of" in bad.stderr
