"""``Generator(execution="batch")`` against the fake Batch API server on 127.0.0.1: the same dataset
as an online run, resume after a kill at every phase without paying twice, failed batches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scopeguard.batch import BatchJobs, BatchSettings
from scopeguard.errors import BatchError
from scopeguard.generation import GenerationConfig, Generator, RunSummary
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.testing import EloqChatModel, FakeOpenAIServer, invented_document
from tests.batch.kills import Kill, kill_at

CONFIG = GenerationConfig(mode="efficient", rounds=2, n_in_scope=2)
FAST = BatchSettings(poll_interval_s=0.0)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(EloqChatModel(model="gpt-4o-mini")) as fake:
        yield fake


def _corpus(n: int = 3) -> list[dict[str, str]]:
    return [{"id": f"doc{i}", "text": invented_document(f"plan-{i}")} for i in range(n)]


def _model(server: FakeOpenAIServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-4o-mini", base_url=server.base_url, max_attempts=1)


def _generator(server: FakeOpenAIServer, settings: BatchSettings = FAST, **kwargs: object) -> Generator:
    return Generator(
        _model(server), config=CONFIG, execution="batch", batch=settings, progress=False, **kwargs
    )  # type: ignore[arg-type]


def _strip_ids(value: Any) -> Any:
    """``value`` without reply ids: they hash the cache key, whose occurrence count differs when
    identical prompts of several documents run concurrently (online) or one by one (batch)."""
    if isinstance(value, dict):
        return {k: _strip_ids(v) for k, v in value.items() if not k.startswith("reply_id")}
    if isinstance(value, list):
        return [_strip_ids(v) for v in value]
    return value


def _dataset(out: Path) -> list[Any]:
    lines = [*(out / "documents.jsonl").open(), *(out / "questions.jsonl").open()]
    return [_strip_ids(json.loads(line)) for line in lines]


def _online(server: FakeOpenAIServer, out: Path) -> RunSummary:
    return Generator(_model(server), config=CONFIG, progress=False).run(_corpus(), out)


def test_batch_run_equals_the_online_run_and_books_its_tokens(
    server: FakeOpenAIServer, tmp_path: Path
) -> None:
    online = _online(server, tmp_path / "online")
    batch = _generator(server).run(_corpus(), tmp_path / "batch")
    assert _dataset(tmp_path / "batch") == _dataset(tmp_path / "online")
    assert batch.docs_done == online.docs_done == 3 and batch.oos_kept == online.oos_kept > 0
    # every batch reply is paid once and booked on its document, at half the online price
    assert batch.usage_total.billed_prompt_tokens == online.usage_total.billed_prompt_tokens > 0
    assert batch.cost_usd_total == pytest.approx(online.cost_usd_total * 0.5)  # type: ignore[operator]
    states = BatchJobs(tmp_path / "batch").states()
    assert states and all(s.status == "completed" and s.closed for s in states)
    assert sum(s.completed for s in states) == sum(server.submitted.values())
    assert max(server.submitted.values()) == 1  # no request was submitted twice
    assert all(s.cleaned for s in states) and server.files == {}  # no file left on the server
    again = _generator(server).run(_corpus(), tmp_path / "batch")
    assert again.docs_resumed == 3 and len(server.batches) == len(states)


@pytest.mark.parametrize("phase", ["uploaded", "submitted", "in_progress", "completed"])
def test_kill_and_resume_at_each_phase_never_submits_twice(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    _online(server, tmp_path / "online")
    out = tmp_path / "batch"
    kill_at(monkeypatch, phase)
    with pytest.raises(Kill):
        _generator(server).run(_corpus(), out)
    state = json.loads((out / ".batch" / "job-00002.json").read_text())
    assert state["status"] == phase
    summary = _generator(server).run(_corpus(), out)
    assert summary.docs_done == 3
    assert _dataset(out) == _dataset(tmp_path / "online")
    assert max(server.submitted.values()) == 1, "a request was submitted twice"
    if phase == "uploaded":  # killed after the upload: the job is submitted from the recorded file
        assert server.uploads == len(server.batches)
    assert server.files == {}  # the resumed run deleted the killed run's files too


def test_kill_after_submit_before_the_id_is_recorded_finds_the_batch(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "batch"
    save = BatchJobs.save

    def lose_the_id(self: BatchJobs, state: object) -> None:
        if getattr(state, "status", None) == "submitted":
            raise Kill  # the server made the batch; the folder never heard of it
        save(self, state)  # type: ignore[arg-type]

    monkeypatch.setattr(BatchJobs, "save", lose_the_id)
    with pytest.raises(Kill):
        _generator(server).run(_corpus(), out)
    monkeypatch.setattr(BatchJobs, "save", save)
    assert _generator(server).run(_corpus(), out).docs_done == 3
    assert max(server.submitted.values()) == 1


@pytest.mark.parametrize("status", ["failed", "expired", "cancelled"])
def test_a_failed_batch_is_a_clear_error_and_the_folder_resumes(tmp_path: Path, status: str) -> None:
    out = tmp_path / "batch"
    with FakeOpenAIServer(EloqChatModel(model="gpt-4o-mini"), batch_statuses=("validating", status)) as bad:
        with pytest.raises(BatchError, match=f"ended {status}") as info:
            _generator(bad).run(_corpus(), out)
        assert info.value.status == status and info.value.batch_id == "batch-1"
        assert bad.files == {}  # the failed job was recorded and its files deleted
    first = json.loads((out / ".batch" / "job-00001.json").read_text())
    assert first["status"] == status and first["batch_id"] is not None
    sent = [json.loads(line)["custom_id"] for line in (out / ".batch" / "job-00001.input.jsonl").open()]
    with FakeOpenAIServer(EloqChatModel(model="gpt-4o-mini")) as good:
        summary = _generator(good).run(_corpus(), out)
        resent = sum(good.submitted[c] for c in sent)
    assert summary.docs_done == 3
    # what the first job returned (half of it when expired or cancelled) was kept, not sent again
    assert first["completed"] == (0 if status == "failed" else len(sent) // 2)
    assert resent == len(sent) - first["completed"]


def test_partial_errors_are_sent_again_then_count_as_llm_errors(tmp_path: Path) -> None:
    bad_ids: set[str] = set()

    def error(custom_id: str) -> str | None:
        if len(bad_ids) < 2 or custom_id in bad_ids:
            bad_ids.add(custom_id)
            return "server_error: try later"
        return None

    with FakeOpenAIServer(EloqChatModel(model="gpt-4o-mini"), request_error=error) as fake:
        summary = _generator(fake).run(_corpus(), tmp_path / "out")
        assert summary.docs_errored_run >= 1 and summary.docs_done + summary.docs_errored_run == 3
        # each failing request was tried request_attempts (2) times, the rest once
        assert {fake.submitted[c] for c in bad_ids} == {2}
