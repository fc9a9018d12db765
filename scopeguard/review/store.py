"""Per-annotator label files for the review page.

Each annotator's labels live in ``DIR/reviews/<annotator>.jsonl``, one object per question
(``question_id``, ``scope``: in_scope | out_of_scope | unsure, ``defused``: yes | no | null,
``annotator``, ``updated``). Every change rewrites the file atomically (temp file + fsync +
rename), so a killed server never leaves a half-written file and nothing given is lost.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any, Literal

from scopeguard.data import atomic_write_jsonl, read_jsonl
from scopeguard.errors import InputError

__all__ = ["DEFUSED_VALUES", "SCOPE_VALUES", "LabelStore", "reviews_dir"]

SCOPE_VALUES = ("in_scope", "out_of_scope", "unsure")
DEFUSED_VALUES = ("yes", "no")
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
