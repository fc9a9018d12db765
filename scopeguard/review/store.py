"""The review page's label files.

A dataset folder: each annotator's labels live in ``DIR/reviews/<annotator>.jsonl``, one object
per question (``question_id``, ``scope``: in_scope | out_of_scope | unsure, ``defused``: yes | no
| null, ``annotator``, ``updated``) (:class:`LabelStore`).

A calibration folder: the labels of the questions it chose live in ``DIR/labels.jsonl``, one
object per question id (``id``, ``label``: in_scope | out_of_scope | unsure, ``updated``: an ISO
8601 time) (:class:`QuestionLabelStore`). Any tool may write that file too: it is read tolerantly
(unknown keys skipped) and re-read before every change, so a label written elsewhere is kept.

Every change rewrites the file atomically (temp file + fsync + rename), so a killed server never
leaves a half-written file and nothing given is lost.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from scopeguard.data import atomic_write_jsonl, read_jsonl
from scopeguard.errors import DatasetError, InputError

__all__ = [
    "DEFAULT_ANNOTATOR",
    "DEFUSED_VALUES",
    "LABELS_FILE",
    "SCOPE_VALUES",
    "LabelStore",
    "QuestionLabel",
    "QuestionLabelStore",
    "read_question_labels",
    "reviews_dir",
]

logger = logging.getLogger(__name__)

ScopeLabel = Literal["in_scope", "out_of_scope", "unsure"]
SCOPE_VALUES: tuple[str, ...] = get_args(ScopeLabel)
DEFUSED_VALUES = ("yes", "no")
#: the annotator a dataset review writes as when none is named
DEFAULT_ANNOTATOR = "annotator1"
#: a calibration folder's label file
LABELS_FILE = "labels.jsonl"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
Field = Literal["scope", "defused"]


def reviews_dir(dataset_dir: str | Path) -> Path:
    return Path(dataset_dir) / "reviews"


class LabelStore:
    """Thread-safe, crash-safe labels of one annotator."""

    def __init__(self, dataset_dir: str | Path, annotator: str) -> None:
        if not _NAME.match(annotator):
            raise InputError(f"annotator name {annotator!r} must be 1-64 letters, digits, '.', '_' or '-'")
        self.annotator = annotator
        self.path = reviews_dir(dataset_dir) / f"{annotator}.jsonl"
        self._lock = threading.Lock()
        self._labels: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for row in read_jsonl(self.path):
                self._labels[str(row["question_id"])] = row

    def labels(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: dict(v) for k, v in self._labels.items()}

    def set(self, question_id: str, field: Field, value: str | None) -> dict[str, Any]:
        """Record ``field`` = ``value`` for a question and persist atomically."""
        allowed = SCOPE_VALUES if field == "scope" else DEFUSED_VALUES
        if field not in ("scope", "defused"):
            raise InputError(f"unknown label field {field!r}; use 'scope' or 'defused'")
        if value is not None and value not in allowed:
            raise InputError(f"invalid {field} label {value!r}; valid: {', '.join(allowed)}")
        with self._lock:
            row = self._labels.get(question_id) or {
                "question_id": question_id,
                "scope": None,
                "defused": None,
                "annotator": self.annotator,
            }
            row = {**row, field: value, "updated": time.time()}
            self._labels[question_id] = row
            atomic_write_jsonl(self.path, list(self._labels.values()))
            return dict(row)


class QuestionLabel(BaseModel):
    """A person's label of one question a calibration chose: ``in_scope`` when the chunks shown
    contain its answer, ``out_of_scope`` when they do not, ``unsure``; ``updated``: when (ISO 8601,
    ``None`` when the tool that wrote the row gave no time)."""

    model_config = ConfigDict(frozen=True)

    id: str
    label: ScopeLabel
    updated: str | None = None

    def row(self) -> dict[str, Any]:
        """The row of ``labels.jsonl``."""
        return self.model_dump(exclude_none=True)


def read_question_labels(path: str | Path) -> dict[str, QuestionLabel]:
    """The labels in a calibration folder's ``labels.jsonl`` by question id (empty when there is no
    file). Unknown keys are skipped; of two rows for one id the later wins. A line that is not a
    JSON object, or has no id or a bad label, is a :class:`~scopeguard.errors.DatasetError`
    naming the file and line."""
    p = Path(path)
    if not p.exists():
        return {}
    out: dict[str, QuestionLabel] = {}
    for lineno, row in enumerate(read_jsonl(p), 1):
        qid, label, updated = row.get("id"), row.get("label"), row.get("updated")
        if not isinstance(qid, str) or not qid:
            raise DatasetError("each label needs a string 'id'", path=str(p), line=lineno)
        if label not in SCOPE_VALUES:
            raise DatasetError(
                f"invalid label {label!r} for {qid!r}; valid: {', '.join(SCOPE_VALUES)}",
                path=str(p),
                line=lineno,
            )
        if qid in out:
            logger.warning("%s:%d: a second label for %r; the later one counts", p, lineno, qid)
        out[qid] = QuestionLabel(id=qid, label=label, updated=updated if isinstance(updated, str) else None)
    return out


class QuestionLabelStore:
    """Thread-safe, crash-safe labels of a calibration folder's chosen questions (``labels.jsonl``).

    Every read and every change reads the file again, so labels written by another tool, another
    tab or an earlier server are picked up; a change rewrites it with one row per id (the last
    label given for an id wins).
    """

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / LABELS_FILE
        self._lock = threading.Lock()

    def labels(self) -> dict[str, QuestionLabel]:
        with self._lock:
            return read_question_labels(self.path)

    def set(self, question_id: str, label: str) -> tuple[QuestionLabel | None, dict[str, QuestionLabel]]:
        """Record ``label`` for a question and persist atomically; returns the question's label
        before (``None``: it had none) and every label now."""
        if label not in SCOPE_VALUES:
            raise InputError(f"invalid label {label!r}; valid: {', '.join(SCOPE_VALUES)}")
        with self._lock:
            labels = read_question_labels(self.path)
            before = labels.get(question_id)
            labels[question_id] = QuestionLabel(
                id=question_id,
                label=label,  # type: ignore[arg-type]
                updated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            )
            atomic_write_jsonl(self.path, [lab.row() for lab in labels.values()])
            return before, labels
