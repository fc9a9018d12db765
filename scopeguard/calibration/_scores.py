"""Reading the calibration questions, resumably: ``DIR/scores.jsonl``.

Each question's verdict is appended as it is read (:class:`ScoredQuestion`, through the run
folder's :class:`~scopeguard.runs.JsonlLog`: flushed, fsynced, a torn last line repaired), keyed by
the detector's identity, the question and its documents' hashes; a rerun skips what is there, and a
changed detector (another head, reader or adapter) reads everything again. A question is read
against its documents together, as the guard reads a question against the chunks it is given:
a generated or labelled question against its own document, a logged one against its chunks. A failed read (an
error, or an ``unknown`` verdict with no score) is counted and reported, never written: the next
run tries it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from scopeguard._progress import progress_meter
from scopeguard.errors import DetectionError, InputError, LLMError
from scopeguard.runs import JsonlLog
from scopeguard.types import Document, Label

__all__ = ["SCORES_FILE", "Readable", "Reading", "ScoredQuestion", "read_scores", "score_key"]

logger = logging.getLogger(__name__)

SCORES_FILE = "scores.jsonl"


class ScoredQuestion(BaseModel):
    """One line of ``scores.jsonl``: a question's score (P(out of scope)) by one detector."""

    model_config = ConfigDict(frozen=True)

    key: str
    id: str
    doc_id: str
    source: str
    label: Literal["in_scope", "out_of_scope"] | None = None
    score: float
    verdict: Label
    detector: str


class Readable(Protocol):
    """A question to read: its id, text, label (``None``: not known), where it came from, and the
    documents the detector reads it against."""

    @property
    def id(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def label(self) -> str | None: ...
    @property
    def source(self) -> str: ...
    @property
    def documents(self) -> tuple[Document, ...]: ...


Q = TypeVar("Q", bound=Readable)


def score_key(identity: Mapping[str, str], question: str, documents: Sequence[Document]) -> str:
    """The key of a score: the detector's identity, the question and its documents' hashes."""
    hashes: str | list[str] = (
        documents[0].content_hash if len(documents) == 1 else [d.content_hash for d in documents]
    )
    text = json.dumps([dict(sorted(identity.items())), question, hashes], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Reading(Generic[Q]):
    """What the reading gave: each scored question with its score; the failed ones with their
    error; how many scores came from an earlier run."""

    scored: list[tuple[Q, float]] = field(default_factory=list)
    failed: list[tuple[Q, str]] = field(default_factory=list)
    reused: int = 0

    def scores(self, label: str) -> list[float]:
        return [s for q, s in self.scored if q.label == label]


def read_scores(
    detector: Any,
    identity: Mapping[str, str],
    questions: Sequence[Q],
    log: JsonlLog,
    *,
    progress: bool | None = None,
) -> Reading[Q]:
    """Score every question of ``questions`` with ``detector`` against its documents, reusing
    the scores in ``log`` and appending the new ones (see the module docstring)."""
    known: dict[str, float] = {row.key: row.score for row in log.records(ScoredQuestion)}
    reading: Reading[Q] = Reading()
    keys = [score_key(identity, q.text, q.documents) for q in questions]
    todo = {k for k in keys if k not in known}
    reading.reused = sum(k not in todo for k in keys)
    bar = progress_meter(total=len(todo), desc=f"read ({detector.name})", enabled=progress)
    try:
        for q, key in zip(questions, keys, strict=True):
            if key in known:
                reading.scored.append((q, known[key]))
                continue
            score, verdict, error = _read(detector, q)
            bar.update(1)
            if score is None:
                reading.failed.append((q, error))
                continue
            log.append(
                ScoredQuestion(
                    key=key,
                    id=q.id,
                    doc_id=q.doc_id,
                    source=q.source,
                    label=_known(q.label),
                    score=score,
                    verdict=verdict,
                    detector=str(detector.name),
                )
            )
            known[key] = score
            reading.scored.append((q, score))
    finally:
        bar.close()
    return reading


def _known(label: str | None) -> Literal["in_scope", "out_of_scope"] | None:
    if label == "in_scope":
        return "in_scope"
    return "out_of_scope" if label == "out_of_scope" else None


def _read(detector: Any, q: Readable) -> tuple[float | None, Label, str]:
    """``(score, label, "")``, or ``(None, "unknown", why)`` for a failed read."""
    try:
        verdict = detector.detect(q.text, list(q.documents))
    except (LLMError, DetectionError, InputError) as exc:
        logger.warning("question %s: %s failed: %s", q.id, detector.name, exc)
        return None, "unknown", f"{type(exc).__name__}: {exc}"
    if verdict.label == "unknown" or verdict.score is None:
        why = verdict.error or verdict.rationale or "the detector gave no score"
        logger.warning("question %s: %s gave no verdict: %s", q.id, detector.name, why)
        return None, "unknown", why
    return float(verdict.score), verdict.label, ""
