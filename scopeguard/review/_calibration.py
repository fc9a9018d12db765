"""The review page on a calibration folder: label the questions a calibration chose.

``scopeguard calibrate --select N`` writes ``DIR/to_label.jsonl``: the questions a person should
label, in the order to label them, each with the chunks the guard read for it (``id``,
``question``, ``documents``: ``[{"id", "text"}, ...]``). Its ``score``, ``weight`` and ``stratum``
are the calibration's bookkeeping: never read here, never sent to the page, so labels are blind.

Labels go to ``DIR/labels.jsonl`` (:class:`~scopeguard.review.store.QuestionLabelStore`). After
each label the page shows the running estimate (``estimate()``'s ``"text"``), and when every
question has a label, ``on_complete()`` runs once (again after a changed label) and the page shows
its one-line summary. Neither callable can break labelling: a failure is logged, and shown on
the page as one line where it concerns the completion.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from scopeguard.data import read_jsonl
from scopeguard.errors import DatasetError, InputError
from scopeguard.review.store import SCOPE_VALUES, QuestionLabel, QuestionLabelStore
from scopeguard.types import Document

__all__ = [
    "TO_LABEL_FILE",
    "CalibrationReview",
    "ChosenQuestion",
    "Estimate",
    "OnComplete",
    "is_calibration_folder",
    "read_to_label",
]

logger = logging.getLogger(__name__)

#: the questions a calibration chose for labelling, in the order to label them
TO_LABEL_FILE = "to_label.jsonl"

#: the running estimate: ``{"text": one line, ...}`` or ``None`` (nothing to show yet)
Estimate = Callable[[], dict[str, Any] | None]
#: runs when every question has a label; returns a one-line summary
OnComplete = Callable[[], str]


class ChosenQuestion(BaseModel):
    """A question a calibration chose for labelling, with the chunks the guard read for it (in
    retrieval order)."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    documents: tuple[Document, ...]

    def page_item(self) -> dict[str, Any]:
        """What the page shows: the question and its chunks, nothing of the detector's score."""
        return {
            "id": self.id,
            "question": self.question,
            "documents": [{"id": d.id, "text": d.text} for d in self.documents],
        }


def is_calibration_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds questions a calibration chose (``to_label.jsonl``)."""
    return (Path(folder) / TO_LABEL_FILE).is_file()


def _chunks(value: Any, path: Path, line: int) -> tuple[Document, ...]:
    if not isinstance(value, list) or not value:
        raise DatasetError("'documents' must be a non-empty list of chunks", path=str(path), line=line)
    chunks = []
    for n, chunk in enumerate(value, 1):
        if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
            raise DatasetError(f"chunk {n} needs a string 'text'", path=str(path), line=line)
        cid = chunk.get("id")
        if not isinstance(cid, str) or not cid.strip():
            raise DatasetError(f"chunk {n} needs a non-empty string 'id'", path=str(path), line=line)
        chunks.append(Document(id=cid, text=chunk["text"]))
    return tuple(chunks)


def read_to_label(folder: str | Path) -> list[ChosenQuestion]:
    """The questions of ``folder/to_label.jsonl`` in file order; a malformed line is a
    :class:`~scopeguard.errors.DatasetError` naming the file and line."""
    path = Path(folder) / TO_LABEL_FILE
    questions: list[ChosenQuestion] = []
    seen: set[str] = set()
    for lineno, row in enumerate(read_jsonl(path), 1):
        qid, question = row.get("id"), row.get("question")
        if not isinstance(qid, str) or not qid.strip():
            raise DatasetError("each question needs a non-empty string 'id'", path=str(path), line=lineno)
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"question {qid!r} has no 'question' text", path=str(path), line=lineno)
        if qid in seen:
            raise DatasetError(f"duplicate question id {qid!r}", path=str(path), line=lineno)
        seen.add(qid)
        questions.append(
            ChosenQuestion(id=qid, question=question, documents=_chunks(row.get("documents"), path, lineno))
        )
    if not questions:
        raise InputError(f"{path}: no questions to label")
    return questions


def _one_line(text: str) -> str:
    return " ".join(text.split())


class CalibrationReview:
    """What the review server serves for a calibration folder: the page, its items and labels,
    and label writes (validated; a bad one is an :class:`~scopeguard.errors.InputError`)."""

    page = "calibrate.html"

    def __init__(
        self,
        folder: str | Path,
        *,
        estimate: Estimate | None = None,
        on_complete: OnComplete | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.questions = read_to_label(self.folder)
        self._items = [q.page_item() for q in self.questions]
        self._ids = {q.id for q in self.questions}
        self.store = QuestionLabelStore(self.folder)
        self.store.labels()  # a labels.jsonl that cannot be read stops the server before it starts
        self._estimate = estimate
        self._on_complete = on_complete
        self._finish_lock = threading.Lock()
        self._done: dict[str, Any] | None = None

    def _chosen(self, labels: dict[str, QuestionLabel]) -> dict[str, str]:
        return {qid: lab.label for qid, lab in labels.items() if qid in self._ids}

    def _estimate_text(self) -> str | None:
        """The running estimate's one line, or ``None`` (no callable, no estimate yet, a failure)."""
        if self._estimate is None:
            return None
        try:
            result = self._estimate()
        except Exception:
            logger.exception("review: the running estimate failed; labelling goes on without it")
            return None
        if result is None:
            return None
        text = result.get("text") if isinstance(result, dict) else None
        if not isinstance(text, str):
            logger.warning("review: the running estimate gave no 'text' string: %r", result)
            return None
        return _one_line(text) or None

    def _finish(self) -> dict[str, Any]:
        """Call ``on_complete`` (one call at a time): ``{"ok": bool, "text": one line}``."""
        with self._finish_lock:
            if self._on_complete is None:
                done = {"ok": True, "text": f"Done: all {len(self._ids)} questions are labelled."}
            else:
                try:
                    done = {"ok": True, "text": _one_line(f"Done: {self._on_complete()}")}
                except Exception as exc:
                    logger.exception("review: finishing the calibration failed")
                    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                    reason = lines[0] if lines else type(exc).__name__
                    done = {"ok": False, "text": f"Every label is saved, but finishing failed: {reason}"}
            self._done = done
            return done

    def snapshot(self) -> dict[str, Any]:
        """The page's data: items, labels, the running estimate and the last completion."""
        labels = self._chosen(self.store.labels())
        return {
            "mode": "calibration",
            "items": self._items,
            "labels": labels,
            "estimate": self._estimate_text(),
            "done": self._done if len(labels) == len(self._ids) else None,
        }

    def label(self, body: dict[str, Any]) -> dict[str, Any]:
        """Save ``{"id", "label"}``; returns every label, the estimate and, when this label
        completed the set (or changed one of a complete set), the completion's line."""
        qid, label = body.get("id"), body.get("label")
        if not isinstance(qid, str) or not isinstance(label, str):
            raise InputError("body needs string 'id' and 'label'")
        if qid not in self._ids:
            raise InputError(f"unknown question id {qid!r}")
        if label not in SCOPE_VALUES:
            raise InputError(f"invalid label {label!r}; valid: {', '.join(SCOPE_VALUES)}")
        before, after = self.store.set(qid, label)
        labels = self._chosen(after)
        complete = len(labels) == len(self._ids)
        if complete and (before is None or before.label != label):
            done: dict[str, Any] | None = self._finish()
        else:
            done = self._done if complete else None
        return {"id": qid, "label": label, "labels": labels, "estimate": self._estimate_text(), "done": done}
