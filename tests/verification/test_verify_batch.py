"""``run_verification(..., execution="batch")`` against the fake Batch API server on 127.0.0.1:
the same results as an online run, tokens per stage at the batch price, kill-and-resume without
submitting a request twice, no files left on the server; and ``scopeguard verify --execution batch``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scopeguard.batch import BatchJobs, BatchSettings
from scopeguard.cli._app import app
from scopeguard.errors import ConfigurationError
from scopeguard.testing import FakeOpenAIServer, ScriptedChatModel
from scopeguard.verification import VerificationConfig, run_verification
from scopeguard.verification.report import read_results
from tests.batch.kills import Kill, kill_at

FAST = BatchSettings(poll_interval_s=0.0)

DOCUMENTS = [
    {
        "doc_id": "d1",
        "topic": "sea",
        "text": "The Zorbian lighthouse was painted green in 1931 by the guild.",
    },
    {
        "doc_id": "d2",
        "topic": "food",
        "text": "Marlow pies are baked with quince and served at the spring fair.",
    },
]
QUESTIONS = [
    {"id": "q1", "doc_id": "d1", "question": "What colour is the Zorbian lighthouse?", "label": "in_scope"},
    {"id": "q2", "doc_id": "d2", "question": "What fruit goes into Marlow pies?", "label": "in_scope"},
    {"id": "q3", "doc_id": "d2", "question": "When is the spring fair held?", "label": "in_scope"},
]


def _reply(prompt: str) -> str:
    if "act as a classifier" in prompt:
        return "No" if "spring fair held" in prompt else "Yes"
    if "extracting answers" in prompt:
        return "Green, painted in 1931." if "lighthouse" in prompt else "Quince."
    return "Green." if "lighthouse" in prompt else "Quince, at the fair."


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(ScriptedChatModel(_reply, model="gpt-4o-mini")) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
        yield fake


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    (root / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCUMENTS))
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return root


def _config(dataset: Path) -> VerificationConfig:
    return VerificationConfig(
        questions=str(dataset), corpus=str(dataset), llm="openai:gpt-4o-mini", reader=True, k=1
    )


def _results(out: Path) -> list[dict[str, Any]]:
    return sorted((r.model_dump(exclude={"latency_ms"}) for r in read_results(out)), key=lambda r: r["id"])


def test_batch_verification_equals_the_online_one(
    server: FakeOpenAIServer, dataset: Path, tmp_path: Path
) -> None:
    online = run_verification(_config(dataset), tmp_path / "online")
    chat_online = server.chat_requests
    batch = run_verification(_config(dataset), tmp_path / "batch", execution="batch", batch=FAST)
    assert server.chat_requests == chat_online  # nothing went online
    assert _results(tmp_path / "batch") == _results(tmp_path / "online")
    assert batch.distribution == online.distribution and batch.llm_calls == online.llm_calls == 9
    assert {r["verdict"] for r in _results(tmp_path / "batch")} == {"supported", "contradicted"}
    assert max(server.submitted.values()) == 1
    assert len(BatchJobs(tmp_path / "batch").states()) == 3  # answer, reader, classify waves
    assert server.files == {}
    usage = json.loads((tmp_path / "batch" / "batch_usage.json").read_text())
    assert set(usage["stages"]) == {"answer", "reader", "classify"}
    assert all(
        s["usage"]["calls"] == 3 and s["usage"]["billed_prompt_tokens"] > 0 for s in usage["stages"].values()
    )


@pytest.mark.parametrize("phase", ["submitted", "in_progress", "completed"])
def test_kill_and_resume_never_submits_twice(
    server: FakeOpenAIServer, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    run_verification(_config(dataset), tmp_path / "online")
    out = tmp_path / "batch"
    kill_at(monkeypatch, phase)
    with pytest.raises(Kill):
        run_verification(_config(dataset), out, execution="batch", batch=FAST)
    report = run_verification(_config(dataset), out, execution="batch", batch=FAST)
    assert report.n == 3 and _results(out) == _results(tmp_path / "online")
    assert max(server.submitted.values()) == 1, "a request was submitted twice"
    assert server.files == {}


def test_batch_needs_an_openai_model(dataset: Path, tmp_path: Path) -> None:
    config = _config(dataset).model_copy(update={"llm": "scripted-verify-batch"})
    from scopeguard.llm import register_backend

    register_backend("scripted-verify-batch", lambda arg, **_: ScriptedChatModel(_reply))
    with pytest.raises(ConfigurationError, match="needs an OpenAI-compatible model"):
        run_verification(config, tmp_path / "o", execution="batch")


def test_cli_verify_execution_batch(server: FakeOpenAIServer, dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    args = [
        "verify",
        str(dataset),
        "--corpus",
        str(dataset),
        "--out",
        str(out),
        "--llm",
        "openai:gpt-4o-mini",
    ]
    result = CliRunner().invoke(
        app, [*args, "--reader", "--k", "1", "--execution", "batch", "--poll-interval", "0"]
    )
    assert result.exit_code == 0, result.output
    assert len(read_results(out)) == 3 and BatchJobs(out).states() and server.files == {}
    bad = CliRunner().invoke(app, [*args, "--execution", "later"])
    assert bad.exit_code == 2 and "--execution must be 'online' or 'batch'" in bad.output
