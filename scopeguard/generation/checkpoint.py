"""Typed records of one generated document, and the per-document checkpoint store.

A finished document is written atomically to ``OUT/.checkpoints/<safe id>.json``; ``questions.jsonl``
and ``documents.jsonl`` are always rebuilt from the checkpoints, so a killed run loses only the
documents in flight and a re-run never duplicates a question.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scopeguard.data import DOCUMENTS_FILE, QUESTIONS_FILE, atomic_write_text, jsonl_writer
from scopeguard.errors import DatasetError
from scopeguard.generation.accounting import Usage
from scopeguard.generation.config import OFFLINE_MODES

__all__ = [
    "CheckpointStore",
    "ClaimVersion",
    "DocumentRecord",
    "DroppedQuestion",
    "FilterRecord",
    "GeneratedQuestion",
    "StepIssue",
]

logger = logging.getLogger(__name__)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepIssue(_Frozen):
    """An unusable (or leniently accepted) reply: which step, why, and which reply."""

    step: str
    reason: str
    reply_id: str | None = None
    accepted: bool = False
    detail: str = ""


class ClaimVersion(_Frozen):
    """A claim text at ``position`` (0-based) produced in ``round`` (0 = extracted from the document)."""

    position: int
    round: int
    text: str
    reply_id: str | None = None


class FilterRecord(_Frozen):
    """The out-of-scope filter's verdict on one question, with every vote."""

    label: str
    score: float | None = None
    detector: str = ""
    votes: tuple[dict[str, Any], ...] = ()
    llm_calls: int = 0
    reply_ids: tuple[str, ...] = ()
    error: str | None = None


class GeneratedQuestion(_Frozen):
    """A kept question with its provenance.

    The paper's modes fill the claim fields; the offline modes fill ``edit_kind`` (an edit kind of
    :data:`~scopeguard.generation.config.EDIT_KINDS`, ``"unstated"``, ``"followup"`` or
    ``"direct"`` for an in-scope question), ``source_question`` (the in-scope question it was made
    from), ``overlap`` (the share of its content words found in the document), ``filled``
    (``True``: kept from within the filter's margin to bring a short document up to its minimum) and
    ``absent_detail`` (kept out of scope though the filter found it answerable: the kind of detail it
    asks for, which its document states none of).
    """

    id: str
    doc_id: str
    question: str
    label: Literal["in_scope", "out_of_scope"]
    words: int
    claim_index: int | None = None
    true_claim: str | None = None
    hallucinated_claim: str | None = None
    round: int | None = None
    reply_ids: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    filter: FilterRecord | None = None
    edit_kind: str | None = None
    source_question: str | None = None
    overlap: float | None = None
    # kept only to bring a short document up to its minimum, from within the filter's margin
    # (the offline modes); None for every other question
    filled: bool | None = None
    # kept though the filter found it answerable (or doubted it): the kind of detail it asks for
    # that its document states none of ("price", "address", "year", "store", "author";
    # the offline modes)
    absent_detail: str | None = None

    def to_row(self, *, mode: str, model: str) -> dict[str, Any]:
        """The questions.jsonl row: the canonical fields, then provenance as extra fields."""
        offline = {
            k: v
            for k, v in (
                ("edit_kind", self.edit_kind),
                ("source_question", self.source_question),
                ("overlap", self.overlap),
                ("filled", self.filled),
                ("absent_detail", self.absent_detail),
            )
            if v is not None
        }
        return {
            "id": self.id,
            "doc_id": self.doc_id,
            "question": self.question,
            "label": self.label,
            "words": self.words,
            "provenance": {
                "generator": "scopeguard-offline" if mode in OFFLINE_MODES else "eloq-guided-hallucination",
                "mode": mode,
                "model": model,
                "claim_index": self.claim_index,
                "true_claim": self.true_claim,
                "hallucinated_claim": self.hallucinated_claim,
                "round": self.round,
                "reply_ids": {k: list(v) for k, v in self.reply_ids.items()},
                "filter": self.filter.model_dump() if self.filter else None,
                **offline,
            },
        }


class DroppedQuestion(_Frozen):
    """A candidate not kept, with the reason; an offline in-scope one also names the sentence it
    was written from (``true_claim``), as a kept one does."""

    question: str
    claim_index: int | None
    reason: str
    filter: FilterRecord | None = None
    label: Literal["in_scope", "out_of_scope"] = "out_of_scope"
    edit_kind: str | None = None
    source_question: str | None = None
    true_claim: str | None = None


class DocumentRecord(_Frozen):
    """Everything generated for one document (the checkpoint's content).

    ``status`` ``skipped``: an offline mode found the document unusable (empty, one sentence, not
    English, longer than the model's context); ``error`` says why, and it has no questions.
    """

    doc_id: str
    order: int
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    status: Literal["done", "failed", "skipped"]
    error: str | None = None
    mode: str
    model: str
    claims: tuple[str, ...] = ()
    claim_history: tuple[ClaimVersion, ...] = ()
    hallucinated: tuple[ClaimVersion, ...] = ()
    remaining: tuple[int, ...] = ()
    questions: tuple[GeneratedQuestion, ...] = ()
    dropped: tuple[DroppedQuestion, ...] = ()
    issues: tuple[StepIssue, ...] = ()
    usage: dict[str, Usage] = Field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total_usage(self) -> Usage:
        return Usage.total(self.usage.values())

    def count(self, label: str) -> int:
        return sum(q.label == label for q in self.questions)

    def to_document_row(self) -> dict[str, Any]:
        """The documents.jsonl row (claims as in the ELOQ gold data)."""
        return {
            **self.metadata,
            "doc_id": self.doc_id,
            "text": self.text,
            "claims": list(self.claims),
            "hallucinated_claims": [self.hallucinated[i].text for i in self.remaining],
        }


def _safe_name(doc_id: str) -> str:
    """A file name for ``doc_id``: readable part plus a hash, so distinct ids never collide."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", doc_id)[:60].strip("._") or "doc"
    return f"{readable}-{hashlib.sha1(doc_id.encode('utf-8')).hexdigest()[:10]}.json"


class CheckpointStore:
    """One JSON file per finished document under ``OUT/.checkpoints/``."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.out_dir = Path(out_dir)
        self.dir = self.out_dir / ".checkpoints"

    def path_for(self, doc_id: str) -> Path:
        return self.dir / _safe_name(doc_id)

    def save(self, record: DocumentRecord) -> Path:
        path = self.path_for(record.doc_id)
        atomic_write_text(path, record.model_dump_json(indent=1))
        return path

    def _read(self, path: Path) -> DocumentRecord:
        try:
            return DocumentRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, json.JSONDecodeError, ValueError) as exc:
            raise DatasetError(
                f"corrupt checkpoint ({str(exc).splitlines()[0]}); delete it to redo", path=str(path)
            ) from None

    def _paths(self) -> list[Path]:
        return sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []

    def iter_records(self) -> Iterator[DocumentRecord]:
        """Every checkpoint, one at a time (a corrupt file is an error naming it)."""
        for path in self._paths():
            yield self._read(path)

    def load_all(self) -> dict[str, DocumentRecord]:
        """Every checkpoint by document id, all in memory (see :meth:`iter_records`)."""
        return {r.doc_id: r for r in self.iter_records()}

    def rebuild(self) -> tuple[int, int]:
        """Rewrite documents.jsonl and questions.jsonl from the checkpoints; returns (docs, questions).

        Streams: one checkpoint in memory at a time (two passes: the output order, then the rows).
        """
        order: list[tuple[int, str, Path]] = []
        for path in self._paths():
            r = self._read(path)
            if r.status == "done":
                order.append((r.order, r.doc_id, path))
        order.sort()
        n_questions = 0
        with (
            jsonl_writer(self.out_dir / DOCUMENTS_FILE) as write_doc,
            jsonl_writer(self.out_dir / QUESTIONS_FILE) as write_question,
        ):
            for _, _, path in order:
                r = self._read(path)
                write_doc(r.to_document_row())
                for q in r.questions:
                    write_question(q.to_row(mode=r.mode, model=r.model))
                    n_questions += 1
        return len(order), n_questions
