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

import json
import logging
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.evaluation.defusion import Judgement
from scopeguard.types import Verdict

__all__ = ["DetectionRecord", "ResponseRecord", "RunConfig", "RunStore"]

logger = logging.getLogger(__name__)

GoldLabel = Literal["in_scope", "out_of_scope"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunConfig(_Record):
    """What a run evaluates; a resumed run must match it (prompts and limit may grow)."""

    dataset: str
    rag: str
    judge: str
    prompts: tuple[str, ...]
    detector: str | None = None
    votes: int = 3
    adaptive: bool = True
    temperature: float = 0.7
    precheck: bool = True
    max_tokens: int | None = None
    limit: int | None = None
    followup: bool = True

    def mismatch(self, other: RunConfig) -> list[str]:
        """Fields that differ in ways that would mix incomparable results."""
        fixed = (
            "rag",
            "judge",
            "detector",
            "votes",
            "adaptive",
            "temperature",
            "precheck",
            "max_tokens",
            "followup",
        )
        return [f for f in fixed if getattr(self, f) != getattr(other, f)]


class ResponseRecord(_Record):
    """A response of the system under test to one question with one prompt, and its judgements."""

    question_id: str
    doc_id: str
    topic: str
    label: GoldLabel
    prompt: str
    question: str
    response: str | None = None
    defusion: Judgement | None = None
    """Out-of-scope questions: did the response defuse the question (True) or answer it (False)?"""
    refusal: Judgement | None = None
    """In-scope questions: did the response refuse / claim the information is missing (True)?"""
    seconds: float = 0.0
    error: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.question_id, self.prompt)


class DetectionRecord(_Record):
    """A detector's verdict on one question (with its own document)."""

    question_id: str
    doc_id: str
    topic: str
    label: GoldLabel
    verdict: Verdict | None = None
    error: str | None = None


R = TypeVar("R", bound=BaseModel)


def _cut_torn_tail(path: Path) -> None:
    """Drop a partial last line left by a kill mid-write."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        logger.warning(
            "%s: dropping a torn last line (%d bytes) from an interrupted run", path, len(data) - keep
        )
        with path.open("r+b") as fh:
            fh.truncate(keep)


class RunStore:
    """Reads and appends the records of one run folder."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.root = Path(directory)
        self.config_path = self.root / "run.json"
        self.responses_path = self.root / "responses.jsonl"
        self.detections_path = self.root / "detections.jsonl"

    def exists(self) -> bool:
        return self.config_path.is_file()

    def open(self, config: RunConfig) -> None:
        """Create the folder, or check that ``config`` matches the run being resumed."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.exists():
            previous = self.read_config()
            bad = previous.mismatch(config)
            if bad:
                raise ConfigurationError(
                    f"{self.root} holds a run with different settings ({', '.join(bad)}: "
                    + "; ".join(f"{f} was {getattr(previous, f)!r}, now {getattr(config, f)!r}" for f in bad)
                    + "): use another --out folder to start a new run"
                )
            merged = config.model_copy(
                update={"prompts": tuple(dict.fromkeys(previous.prompts + config.prompts))}
            )
        else:
            merged = config
        tmp = self.config_path.with_suffix(".json.tmp")
        tmp.write_text(merged.model_dump_json(indent=2), encoding="utf-8")
        os.replace(tmp, self.config_path)
        for path in (self.responses_path, self.detections_path):
            _cut_torn_tail(path)

    def read_config(self) -> RunConfig:
        if not self.config_path.is_file():
            raise InputError(f"{self.root} is not an evaluation run folder (no run.json)")
        try:
            return RunConfig.model_validate_json(self.config_path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            raise InputError(
                f"{self.config_path}: not a valid run configuration ({exc.error_count()} errors)"
            ) from None

    @staticmethod
    def _append(path: Path, record: BaseModel) -> None:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(record.model_dump_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def append_response(self, record: ResponseRecord) -> None:
        self._append(self.responses_path, record)

    def append_detection(self, record: DetectionRecord) -> None:
        self._append(self.detections_path, record)

    @staticmethod
    def _read(path: Path, model: type[R]) -> list[R]:
        if not path.is_file():
            return []
        out: list[R] = []
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    out.append(model.model_validate(json.loads(line)))
                except (json.JSONDecodeError, ValidationError):
                    logger.warning("%s:%d: skipping an unreadable record", path, lineno)
        return out

    def responses(self) -> dict[tuple[str, str], ResponseRecord]:
        """The latest record per (question id, prompt)."""
        return {r.key: r for r in self._read(self.responses_path, ResponseRecord)}

    def detections(self) -> dict[str, DetectionRecord]:
        """The latest record per question id."""
        return {r.question_id: r for r in self._read(self.detections_path, DetectionRecord)}

    def summary(self) -> dict[str, Any]:
        responses = self.responses()
        return {
            "responses": len(responses),
            "errors": sum(1 for r in responses.values() if r.error),
            "detections": len(self.detections()),
        }
