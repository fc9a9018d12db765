"""The on-disk record of an evaluation run: append-only JSONL, fsynced per record, resumable.

A run folder holds::

    run.json           the configuration (checked on resume)
    responses.jsonl    one ResponseRecord per (question, prompt): response, judgements, error
    detections.jsonl   one DetectionRecord per question (when a detector is evaluated)

Records are appended and fsynced one at a time, so a kill loses at most the record being
written; a torn last line is cut off when the run is reopened. When a key appears more than
once (a retried error), the last record wins.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from scopeguard.errors import InputError
from scopeguard.evaluation.defusion import Judgement
from scopeguard.judging import EVALUATION_DEFAULTS
from scopeguard.runs import JsonlLog, RunFolder, append_jsonl, repair_torn_tail
from scopeguard.types import Verdict

__all__ = ["DetectionRecord", "ResponseRecord", "RunConfig", "RunStore"]

logger = logging.getLogger(__name__)

GoldLabel = Literal["in_scope", "out_of_scope"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunConfig(_Record):
    """What a run evaluates; a resumed run must match it (dataset, prompts and limit may change).

    The judge settings default to :data:`~scopeguard.judging.EVALUATION_DEFAULTS` (3 adaptive
    votes at 0.7 with a follow-up turn); ``max_tokens`` (default 256, the judges' default) caps
    every RAG response and judge reply, ``None`` lifts the cap (the paper's setting:
    :func:`~scopeguard.evaluation.paper_evaluation_settings`). The CLI's defaults are these.
    """

    dataset: str
    rag: str
    judge: str
    prompts: tuple[str, ...]
    detector: str | None = None
    votes: int = EVALUATION_DEFAULTS.votes
    adaptive: bool = EVALUATION_DEFAULTS.adaptive
    temperature: float = EVALUATION_DEFAULTS.temperature
    precheck: bool = True
    max_tokens: int | None = EVALUATION_DEFAULTS.max_tokens
    limit: int | None = None
    followup: bool = EVALUATION_DEFAULTS.followup


_FREE = ("dataset", "prompts", "limit")
"""Fields a resumed run may change: more prompts or a larger limit extend it."""


def _merge_prompts(saved: RunConfig, config: RunConfig) -> RunConfig:
    return config.model_copy(update={"prompts": tuple(dict.fromkeys(saved.prompts + config.prompts))})


class _QuestionRecord(_Record):
    """What every record says of the question it is about."""

    question_id: str
    doc_id: str
    topic: str
    label: GoldLabel


class ResponseRecord(_QuestionRecord):
    """A response of the system under test to one question with one prompt, and its judgements."""

    prompt: str
    question: str
    response: str | None = None
    defusion: Judgement | None = None
    """Out-of-scope questions: did the response defuse the question (True) or answer it (False)?"""
    refusal: Judgement | None = None
    """In-scope questions: did the response refuse / claim the information is missing (True)?"""
    seconds: float = 0.0
    error: str | None = None
    truncated: bool = False
    """The response stopped at the ``max_tokens`` cap (a RAG prompt's answer; a pipeline's: never)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.question_id, self.prompt)


class DetectionRecord(_QuestionRecord):
    """A detector's verdict on one question (with its own document)."""

    verdict: Verdict | None = None
    error: str | None = None


class RunStore:
    """Reads and appends the records of one run folder (a :class:`~scopeguard.runs.RunFolder`)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.root = Path(directory)
        self._folder = RunFolder(self.root, RunConfig, config_file="run.json", free=_FREE)
        self.config_path = self._folder.config_path
        self.responses_path = self.root / "responses.jsonl"
        self.detections_path = self.root / "detections.jsonl"

    def exists(self) -> bool:
        return self._folder.exists()

    def open(self, config: RunConfig) -> None:
        """Create the folder, or check that ``config`` matches the run being resumed (its prompts
        are added to the saved ones); a torn last record left by a kill is cut off."""
        self._folder.open(config, merge=_merge_prompts)
        for path in (self.responses_path, self.detections_path):
            repair_torn_tail(path)

    def read_config(self) -> RunConfig:
        if not self.exists():
            raise InputError(f"{self.root} is not an evaluation run folder (no run.json)")
        return self._folder.read_config()

    def append_response(self, record: ResponseRecord) -> None:
        append_jsonl(self.responses_path, record)

    def append_detection(self, record: DetectionRecord) -> None:
        append_jsonl(self.detections_path, record)

    def responses(self) -> dict[tuple[str, str], ResponseRecord]:
        """The latest record per (question id, prompt)."""
        log = JsonlLog(self.responses_path, repair=False)
        return {r.key: r for r in log.records(ResponseRecord)}

    def detections(self) -> dict[str, DetectionRecord]:
        """The latest record per question id."""
        log = JsonlLog(self.detections_path, repair=False)
        return {r.question_id: r for r in log.records(DetectionRecord)}

    def summary(self) -> dict[str, Any]:
        responses = self.responses()
        return {
            "responses": len(responses),
            "errors": sum(1 for r in responses.values() if r.error),
            "detections": len(self.detections()),
        }
