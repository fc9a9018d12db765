"""``evaluate(..., execution="batch")`` against the fake Batch API server on 127.0.0.1: the same
records as an online run, tokens booked per stage at the batch price, kill-and-resume without
submitting a request twice, and no files left on the server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scopeguard.batch import BatchJobs, BatchSettings
from scopeguard.errors import ConfigurationError
from scopeguard.evaluation import evaluate_config
from scopeguard.evaluation.store import RunConfig, RunStore
from scopeguard.testing import FakeOpenAIServer, ScriptedChatModel
from tests.batch.kills import Kill, kill_at
from tests.evaluation.conftest import scripted_system

FAST = BatchSettings(poll_interval_s=0.0)
MODEL = "openai:gpt-4o-mini"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(ScriptedChatModel(scripted_system(), model="gpt-4o-mini")) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
        yield fake


def _config(dataset: Path) -> RunConfig:
    return RunConfig(dataset=str(dataset), rag=MODEL, judge=MODEL, prompts=("basic", "zero-shot-cot"))


def _records(out: Path) -> list[dict[str, Any]]:
    rows = [r.model_dump(exclude={"seconds"}) for r in RunStore(out).responses().values()]
    return sorted(rows, key=lambda r: (r["question_id"], r["prompt"]))


def _run(dataset: Path, out: Path, execution: str = "batch") -> Any:
    return evaluate_config(
        _config(dataset),
        out,
        progress=False,
        plots=False,
        execution=execution,
        batch=FAST,  # type: ignore[arg-type]
    )


def test_batch_evaluation_equals_the_online_one_and_books_tokens_per_stage(
    server: FakeOpenAIServer, tiny_dataset: Path, tmp_path: Path
) -> None:
    online = _run(tiny_dataset, tmp_path / "online", "online")
    chat_online = server.chat_requests
    batch = _run(tiny_dataset, tmp_path / "batch")
    assert server.chat_requests == chat_online  # the batch run sent no online request
    assert _records(tmp_path / "batch") == _records(tmp_path / "online")
    assert batch.steps == online.steps == 8 and batch.failed == 0
    assert batch.report.summary == online.report.summary
    assert max(server.submitted.values()) == 1  # no request was submitted twice
    states = BatchJobs(tmp_path / "batch").states()
    assert len(states) >= 2 and all(s.closed and s.cleaned for s in states)  # answer wave, judge wave
    assert server.files == {}  # every input and output file was deleted
    usage = json.loads((tmp_path / "batch" / "batch_usage.json").read_text())
    assert usage["price_factor"] == 0.5 and set(usage["stages"]) == {"answer", "judge"}
    answer = usage["stages"]["answer"]
    assert answer["usage"]["calls"] == 8 and answer["usage"]["billed_prompt_tokens"] > 0
    assert answer["cost_usd"] > 0
    # a finished folder resumes with nothing to do
    assert _run(tiny_dataset, tmp_path / "batch").steps == 8 and len(server.batches) == len(states)


@pytest.mark.parametrize("phase", ["uploaded", "submitted", "in_progress", "completed"])
def test_kill_and_resume_never_submits_twice(
    server: FakeOpenAIServer,
    tiny_dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    phase: str,
) -> None:
    _run(tiny_dataset, tmp_path / "online", "online")
    out = tmp_path / "batch"
    kill_at(monkeypatch, phase)
    with pytest.raises(Kill):
        _run(tiny_dataset, out)
    assert json.loads((out / ".batch" / "job-00002.json").read_text())["status"] == phase
    assert _run(tiny_dataset, out).failed == 0
    assert _records(out) == _records(tmp_path / "online")
    assert max(server.submitted.values()) == 1, "a request was submitted twice"
    assert server.files == {}  # the resumed run cleaned up after the killed one too


def test_batch_needs_openai_models(tiny_dataset: Path, tmp_path: Path) -> None:
    from scopeguard.llm import register_backend

    register_backend("scripted-eval-batch", lambda arg, **_: ScriptedChatModel(scripted_system()))
    config = _config(tiny_dataset).model_copy(
        update={"rag": "scripted-eval-batch", "judge": "scripted-eval-batch"}
    )
    with pytest.raises(ConfigurationError, match="needs OpenAI-compatible models"):
        evaluate_config(config, tmp_path / "o", progress=False, plots=False, execution="batch")
