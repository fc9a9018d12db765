"""Reading the calibration questions, resumably: ``DIR/scores.jsonl``.

Each question's verdict is appended as it is read (:class:`ScoredQuestion`, through the run
folder's :class:`~scopeguard.runs.JsonlLog`: flushed, fsynced, a torn last line repaired), keyed by
the detector's identity, the question and its document's hash; a rerun skips what is there, and a
changed detector (another head, reader or adapter) reads everything again. A failed read (an
error, or an ``unknown`` verdict with no score) is counted and reported, never written: the next
run tries it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from scopeguard._progress import progress_meter
from scopeguard.calibration._questions import CalibrationQuestion
from scopeguard.errors import DetectionError, InputError, LLMError
from scopeguard.runs import JsonlLog
from scopeguard.types import Document, Label

__all__ = ["SCORES_FILE", "Reading", "ScoredQuestion", "read_scores", "score_key"]

logger = logging.getLogger(__name__)

SCORES_FILE = "scores.jsonl"


class ScoredQuestion(BaseModel):
    """One line of ``scores.jsonl``: a question's score (P(out of scope)) by one detector."""

    model_config = ConfigDict(frozen=True)

    key: str
    id: str
    doc_id: str
    source: str
    label: Literal["in_scope", "out_of_scope"]
    score: float
    verdict: Label
    detector: str


def score_key(identity: Mapping[str, str], question: str, document: Document) -> str:
    """The key of a score: the detector's identity, the question and its document's hash."""
    text = json.dumps([dict(sorted(identity.items())), question, document.content_hash], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Reading:
    """What the reading gave: each scored question with its score; the failed ones with their
    error; how many scores came from an earlier run."""

    scored: list[tuple[CalibrationQuestion, float]] = field(default_factory=list)
    failed: list[tuple[CalibrationQuestion, str]] = field(default_factory=list)
    reused: int = 0

    def scores(self, label: str) -> list[float]:
        return [s for q, s in self.scored if q.question.label == label]


def read_scores(
    detector: Any,
    identity: Mapping[str, str],
    questions: Sequence[CalibrationQuestion],
    log: JsonlLog,
    *,
    progress: bool | None = None,
) -> Reading:
    """Score every question of ``questions`` with ``detector`` against its own document, reusing
    the scores in ``log`` and appending the new ones (see the module docstring)."""
    known: dict[str, float] = {row.key: row.score for row in log.records(ScoredQuestion)}
    reading = Reading()
    keys = [score_key(identity, q.question.question, q.document) for q in questions]
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
                    id=q.question.id,
                    doc_id=q.question.doc_id,
                    source=q.source,
                    label=q.question.label,
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


def _read(detector: Any, q: CalibrationQuestion) -> tuple[float | None, Label, str]:
    """``(score, label, "")``, or ``(None, "unknown", why)`` for a failed read."""
    try:
        verdict = detector.detect(q.question.question, [q.document])
    except (LLMError, DetectionError, InputError) as exc:
        logger.warning("question %s: %s failed: %s", q.question.id, detector.name, exc)
        return None, "unknown", f"{type(exc).__name__}: {exc}"
    if verdict.label == "unknown" or verdict.score is None:
        why = verdict.error or verdict.rationale or "the detector gave no score"
        logger.warning("question %s: %s gave no verdict: %s", q.question.id, detector.name, why)
        return None, "unknown", why
    return float(verdict.score), verdict.label, ""
