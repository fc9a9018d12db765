"""Batch API jobs kept in a run folder, resumable after a kill at any point.

A job's life, each step recorded (atomically) in ``<folder>/.batch/<name>.json`` before the next::

    written    the requests are in <name>.input.jsonl (custom_id, method, url, body)
    uploaded   POST /v1/files (purpose batch) returned input_file_id
    submitted  POST /v1/batches returned batch_id: recorded before anything else happens
    <status>   GET /v1/batches/{id} while it runs (validating, in_progress, finalizing...)
    completed / failed / expired / cancelled: the server's final status
    closed     (a flag) the caller stored the results (BatchJobs.close): the job is no longer open
    cleaned    (a flag) its input, output and error files were deleted from the server

A resumed run calls :meth:`BatchJobs.run` on every open job and continues from its recorded step:
it uploads again only when no file id was recorded (an upload costs nothing), and before
submitting it looks for a batch already made from its input file (``GET /v1/batches``), so a kill
between the server's answer and the recording of the batch id does not pay twice. Submission is
never retried blindly for the same reason.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scopeguard.data import atomic_write_text
from scopeguard.errors import BatchError, LLMError, LLMResponseError
from scopeguard.llm.base import Completion

if TYPE_CHECKING:  # the openai SDK loads only when a batch job runs
    from scopeguard.llm.openai_compat import OpenAIChatModel

__all__ = ["BatchJobState", "BatchJobs", "BatchOutcome", "BatchSettings"]

logger = logging.getLogger(__name__)

ENDPOINT = "/v1/chat/completions"
_FINAL = ("completed", "failed", "expired", "cancelled")


class BatchSettings(BaseModel):
    """How batch jobs are run.

    ``price_factor`` scales the cost estimate of batch replies: the OpenAI Batch API bills half
    the standard price (0.5, the default); set 1.0 for a server without a discount.
    ``max_wait_s``: give up waiting after this long (the job stays submitted and a re-run picks
    it up again); ``None`` waits for the completion window.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    poll_interval_s: float = Field(default=30.0, ge=0.0)
    completion_window: str = "24h"
    price_factor: float = Field(default=0.5, gt=0.0, le=1.0)
    max_wait_s: float | None = Field(default=None, gt=0.0)
    request_attempts: int = Field(default=2, ge=1, le=5)


class BatchJobState(BaseModel):
    """What the run folder knows of one job (see the module docstring for ``status``)."""

    name: str
    model: str
    endpoint: str
    requests: int
    status: str = "written"
    input_file_id: str | None = None
    batch_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    closed: bool = False
    cleaned: bool = False

    @property
    def open(self) -> bool:
        return not self.closed


@dataclass
class BatchOutcome:
    """A finished job's results: ``replies`` and ``errors`` by custom_id."""

    state: BatchJobState
    replies: dict[str, Completion] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.state.status == "completed"


def _completion(body: Any, model: OpenAIChatModel) -> Completion:
    import openai

    from scopeguard.llm._openai_replies import merge, validate

    try:
        reply = openai.types.chat.ChatCompletion.model_validate(body)
    except ValidationError as exc:
        raise LLMResponseError(f"a batch result is not a chat completion: {exc.errors()[0]['msg']}") from None
    validate(reply, model.base_url)
    return merge([reply], len(reply.choices), model.model, model.base_url)


def _delete(client: Any, file_id: str) -> None:
    client.files.delete(file_id)


class BatchJobs:
    """The batch jobs of the run folder ``folder`` (files under ``folder/.batch``)."""

    def __init__(self, folder: str | os.PathLike[str], settings: BatchSettings | None = None) -> None:
        self.dir = Path(folder) / ".batch"
        self.settings = settings or BatchSettings()

    def _state_path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def save(self, state: BatchJobState) -> None:
        atomic_write_text(self._state_path(state.name), state.model_dump_json(indent=2) + "\n")

    def states(self) -> list[BatchJobState]:
        """Every job of the folder, oldest first."""
        if not self.dir.is_dir():
            return []
        return [BatchJobState.model_validate_json(p.read_text()) for p in sorted(self.dir.glob("*.json"))]

    def open_jobs(self) -> list[BatchJobState]:
        """The jobs a previous run left submitted or unmerged."""
        return [s for s in self.states() if s.open]

    def write(self, model: OpenAIChatModel, bodies: Mapping[str, dict[str, Any]]) -> BatchJobState:
        """Write a new job's input file (one line per ``custom_id -> body``) and its state."""
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"job-{len(list(self.dir.glob('*.json'))) + 1:05d}"
        lines = (
            json.dumps(
                {"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body}, ensure_ascii=False
            )
            for cid, body in bodies.items()
        )
        atomic_write_text(self.dir / f"{name}.input.jsonl", "".join(line + "\n" for line in lines))
        state = BatchJobState(name=name, model=model.model, endpoint=model.base_url, requests=len(bodies))
        self.save(state)
        return state

    def unclean_jobs(self) -> list[BatchJobState]:
        """Closed jobs whose files a kill left on the server (see :meth:`delete_files`)."""
        return [s for s in self.states() if s.closed and not s.cleaned]

    def close(self, model: OpenAIChatModel, state: BatchJobState) -> None:
        """Mark a job handled (what it returned is stored, or its failure recorded): it is no longer
        open; then delete its files from the server."""
        state = state.model_copy(update={"closed": True})
        self.save(state)
        self.delete_files(model, state)

    def delete_files(self, model: OpenAIChatModel, state: BatchJobState) -> None:
        """Delete the input, output and error files of a closed job from the server (best effort:
        a file that is gone already or a server without ``DELETE /v1/files`` is logged)."""
        for file_id in (state.input_file_id, state.output_file_id, state.error_file_id):
            if file_id is None:
                continue
            try:
                model.call_api(partial(_delete, file_id=file_id), retry=False)
            except LLMError as exc:
                logger.warning("batch job %s: could not delete file %s: %s", state.name, file_id, exc)
        self.save(state.model_copy(update={"cleaned": True}))

    # -- the steps ----------------------------------------------------------------------------
    def run(self, model: OpenAIChatModel, state: BatchJobState) -> BatchOutcome:
        """Take ``state`` from its recorded step to a final status and read its results."""
        if state.input_file_id is None:
            data = (self.dir / f"{state.name}.input.jsonl").read_bytes()
            uploaded = model.call_api(
                lambda c: c.files.create(file=(f"{state.name}.jsonl", data), purpose="batch")
            )
            state = state.model_copy(update={"input_file_id": uploaded.id, "status": "uploaded"})
            self.save(state)
        if state.batch_id is None:
            state = self._submit(model, state)
        state = self._wait(model, state)
        outcome = BatchOutcome(state)
        if state.output_file_id:
            self._read(model, state.output_file_id, outcome)
        if state.error_file_id:
            self._read(model, state.error_file_id, outcome)
        outcome.state = state.model_copy(
            update={
                "completed": len(outcome.replies),
                "failed": len(outcome.errors),
                "prompt_tokens": sum(c.prompt_tokens for c in outcome.replies.values()),
                "completion_tokens": sum(c.completion_tokens for c in outcome.replies.values()),
            }
        )
        self.save(outcome.state)
        return outcome

    def _find(self, model: OpenAIChatModel, input_file_id: str) -> str | None:
        """The id of a batch already made from ``input_file_id`` (a kill before it was recorded)."""
        try:
            for batch in model.call_api(lambda c: c.batches.list(limit=100)):
                if batch.input_file_id == input_file_id:
                    return str(batch.id)
        except LLMError as exc:  # a server without the list endpoint
            logger.info("cannot list batches on %s (%s): submitting", model.base_url, exc)
        return None

    def _submit(self, model: OpenAIChatModel, state: BatchJobState) -> BatchJobState:
        input_file_id = state.input_file_id or ""
        batch_id = self._find(model, input_file_id)
        if batch_id is None:
            try:  # one attempt: a retried create could start the same job twice
                batch = model.call_api(
                    lambda c: c.batches.create(
                        input_file_id=input_file_id,
                        endpoint=ENDPOINT,
                        completion_window=self.settings.completion_window,
                        metadata={"scopeguard_job": state.name},
                    ),
                    retry=False,
                )
                batch_id = str(batch.id)
            except LLMError as exc:
                batch_id = self._find(model, input_file_id)
                if batch_id is None:
                    raise BatchError(
                        f"submitting batch job {state.name} to {model.base_url} failed: {exc}; "
                        "re-run on the same folder to try again",
                        state_path=str(self._state_path(state.name)),
                    ) from None
        state = state.model_copy(update={"batch_id": batch_id, "status": "submitted"})
        self.save(state)  # before anything else: a resumed run finds the job again
        logger.info("batch job %s submitted as %s (%d requests)", state.name, batch_id, state.requests)
        return state

    def _wait(self, model: OpenAIChatModel, state: BatchJobState) -> BatchJobState:
        started = time.monotonic()
        batch_id = state.batch_id or ""
        while True:
            batch = model.call_api(lambda c: c.batches.retrieve(batch_id))
            if batch.status != state.status:
                state = state.model_copy(
                    update={
                        "status": batch.status,
                        "output_file_id": batch.output_file_id,
                        "error_file_id": batch.error_file_id,
                    }
                )
                self.save(state)
                logger.info("batch %s: %s", batch_id, batch.status)
            if batch.status in _FINAL:
                if batch.status != "completed":
                    errors = getattr(getattr(batch, "errors", None), "data", None) or []
                    detail = "; ".join(f"{e.code}: {e.message}" for e in errors) or "no detail given"
                    state = state.model_copy(update={"error": detail})
                    self.save(state)
                return state
            waited = time.monotonic() - started
            if self.settings.max_wait_s is not None and waited >= self.settings.max_wait_s:
                raise BatchError(
                    f"batch {batch_id} is still {batch.status} after {waited:.0f}s; it stays "
                    "submitted: re-run on the same folder to collect it",
                    batch_id=batch_id,
                    status=batch.status,
                    state_path=str(self._state_path(state.name)),
                )
            time.sleep(self.settings.poll_interval_s)

    def _read(self, model: OpenAIChatModel, file_id: str, outcome: BatchOutcome) -> None:
        text = model.call_api(lambda c: c.files.content(file_id)).text
        for line in text.splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            cid, response = row.get("custom_id"), row.get("response") or {}
            if not isinstance(cid, str):
                continue
            if response.get("status_code") == 200:
                try:
                    outcome.replies[cid] = _completion(response.get("body"), model)
                    continue
                except LLMError as exc:
                    outcome.errors[cid] = str(exc)
                    continue
            error = row.get("error") or (response.get("body") or {}).get("error") or {}
            outcome.errors[cid] = (
                f"{error.get('code', response.get('status_code'))}: {error.get('message', '')}"
            )

    def failure(self, state: BatchJobState) -> BatchError:
        """The error for a job that ended ``failed``, ``expired`` or ``cancelled``."""
        return BatchError(
            f"batch {state.batch_id} ({state.name}, {state.requests} requests to {state.endpoint}) ended "
            f"{state.status}: {state.error}. {state.completed} results were kept; re-run on the same "
            "folder to submit the rest as a new job",
            batch_id=state.batch_id,
            status=state.status,
            state_path=str(self._state_path(state.name)),
        )
