"""Calibrating on a query log: the questions people asked, read against the chunks they got.

``scopeguard calibrate CORPUS --questions LOG`` reads each logged question against the chunks the
guard would read in production: those the log gives (``documents``), the corpus documents it names
(``doc_ids``), or else the top ``k`` that the retriever finds in CORPUS. ``--select N`` then
chooses the questions a person should label (:mod:`scopeguard.calibration._labels` says how and
why) and writes them, with their chunks, to ``DIR/to_label.jsonl``; the labels come back in
``DIR/labels.jsonl`` (``scopeguard review DIR``, or any tool), and the next run, or
:func:`update_profile` from the review page, chooses the threshold from them.

The folder's files:

- ``to_label.jsonl``: one chosen question a line (``id``, ``question``, ``documents``, ``score``,
  ``weight``, ``stratum``), in the order to label them;
- ``selection.json``: what the labels are weighed against (the detector and its identity, the
  budget, the log's size and every logged question's score, the strata);
- ``labels.jsonl``: ``{"id", "label", "updated"}``, one line per question, ``label`` one of
  ``in_scope``, ``out_of_scope``, ``unsure`` (unsure ones are left out).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from scopeguard.calibration._config import CalibrationConfig
from scopeguard.calibration._labels import (
    TEST_POINT,
    Choice,
    LabelledScore,
    choose_to_label,
    weighted_point,
)
from scopeguard.calibration._passages import corpus_sha256
from scopeguard.calibration._scores import Reading
from scopeguard.data import atomic_write_json, atomic_write_jsonl
from scopeguard.errors import DatasetError, InputError
from scopeguard.querylog import LoggedQuestion, read_query_log
from scopeguard.review import LABELS_FILE, TO_LABEL_FILE, read_question_labels
from scopeguard.types import Document

__all__ = [
    "LABELS_FILE",
    "SELECTION_FILE",
    "TO_LABEL_FILE",
    "LabelledLog",
    "LogQuestion",
    "LogStage",
    "Selection",
    "labelled_log",
    "log_questions",
    "read_labels",
    "write_selection",
]

logger = logging.getLogger(__name__)

SELECTION_FILE = "selection.json"


@dataclass(frozen=True)
class LogQuestion:
    """A logged question and the chunks it is read against (``retrieved``: found by the retriever,
    not given by the log)."""

    logged: LoggedQuestion
    documents: tuple[Document, ...]
    retrieved: bool = False
    source: str = "log"

    @property
    def id(self) -> str:
        return self.logged.id

    @property
    def doc_id(self) -> str:
        return self.documents[0].id

    @property
    def text(self) -> str:
        return self.logged.question

    @property
    def label(self) -> str | None:
        return self.logged.label if self.logged.label in ("in_scope", "out_of_scope") else None


def log_questions(
    log: str | os.PathLike[str], corpus: str | os.PathLike[str], *, k: int, retriever: str
) -> list[LogQuestion]:
    """Every question of ``log`` with the chunks it is read against (see the module docstring): the
    top ``k`` of ``retriever`` for one that names none (:func:`scopeguard.retrieval.retrieve`
    checks ``k``)."""
    logged = read_query_log(log)
    if all(q.documents for q in logged):
        return [LogQuestion(q, q.documents) for q in logged]
    from scopeguard.generation.corpus import corpus_passages

    passages = corpus_passages(corpus)
    by_id = {d.id: d for d in passages}
    out: dict[str, LogQuestion] = {}
    for q in logged:
        if q.documents:
            out[q.id] = LogQuestion(q, q.documents)
        elif q.doc_ids:
            unknown = [d for d in q.doc_ids if d not in by_id]
            if unknown:
                raise InputError(
                    f"{log}:{q.line}: doc_ids {', '.join(map(repr, unknown[:3]))} "
                    f"are not documents of {corpus}"
                )
            out[q.id] = LogQuestion(q, tuple(by_id[d] for d in q.doc_ids))
    todo = [q for q in logged if q.id not in out]
    if todo:
        from scopeguard.retrieval import get_retriever, retrieve

        logger.info("retrieving the top %d of %d passages for %d questions", k, len(passages), len(todo))
        found = retrieve(get_retriever(retriever), passages, [q.question for q in todo], k)
        for q, hits in zip(todo, found, strict=True):
            out[q.id] = LogQuestion(q, tuple(h.document for h in hits), retrieved=True)
    return [out[q.id] for q in logged]


class Selection(BaseModel):
    """``selection.json``: what the chosen questions' labels are weighed against."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    detector: str
    identity: dict[str, str]
    budget: float
    hedge_budget: float | None = None
    seed: int
    log: str
    scores: dict[str, float]
    chosen: dict[str, float]  # id -> weight
    strata: dict[str, dict[str, float]]

    @property
    def test_weight(self) -> float:
        """The weight of the new answerable question counted at the top: ``TEST_POINT`` of one
        question of the stratum the threshold falls in (that of the highest-scored chosen one)."""
        if not self.chosen:
            return TEST_POINT
        top = max(self.chosen, key=lambda qid: self.scores[qid])
        return TEST_POINT * self.chosen[top]


def write_selection(
    root: Path,
    questions: Sequence[LogQuestion],
    scores: Mapping[str, float],
    n: int,
    *,
    detector: str,
    identity: Mapping[str, str],
    budget: float,
    hedge_budget: float | None,
    seed: int,
    log: str,
) -> Selection:
    """Choose ``n`` of the scored logged questions to label; write ``to_label.jsonl`` and
    ``selection.json``. An existing selection with the same log, budget and seed is kept (labels
    already given stay valid)."""
    existing = read_selection(root)
    if existing is not None and (existing.log, existing.budget, existing.seed, len(existing.chosen)) == (
        log,
        budget,
        seed,
        min(n, len(scores)),
    ):
        return existing
    choices: list[Choice] = choose_to_label(scores, n, budget, seed=seed)
    by_id = {q.id: q for q in questions}
    rows = [
        {
            "id": c.id,
            "question": by_id[c.id].text,
            "documents": [{"id": d.id, "text": d.text} for d in by_id[c.id].documents],
            "score": c.score,
            "weight": c.weight,
            "stratum": c.stratum,
        }
        for c in choices
    ]
    strata: dict[str, dict[str, float]] = {}
    for c in choices:
        row = strata.setdefault(c.stratum, {"chosen": 0, "weight": c.weight, "lowest": c.score})
        row["chosen"] += 1
        row["lowest"] = min(row["lowest"], c.score)
    selection = Selection(
        detector=detector,
        identity=dict(identity),
        budget=budget,
        hedge_budget=hedge_budget,
        seed=seed,
        log=log,
        scores=dict(scores),
        chosen={c.id: c.weight for c in choices},
        strata=strata,
    )
    atomic_write_jsonl(root / TO_LABEL_FILE, rows)
    atomic_write_json(root / SELECTION_FILE, selection.model_dump())
    return selection


def read_selection(root: str | os.PathLike[str]) -> Selection | None:
    """``selection.json`` of the folder ``root`` (``None`` when there is none)."""
    path = Path(root) / SELECTION_FILE
    if not path.is_file():
        return None
    try:
        return Selection.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"{path}: not a selection file ({str(exc).splitlines()[0]})") from None


def read_labels(root: str | os.PathLike[str]) -> dict[str, str]:
    """The labels of ``root/labels.jsonl`` (id -> label; the last line for an id wins); empty when
    there is no such file. A line without an ``id`` or with another label: an :class:`InputError`
    naming it."""
    try:
        return {qid: q.label for qid, q in read_question_labels(Path(root) / LABELS_FILE).items()}
    except DatasetError as exc:
        raise InputError(str(exc)) from None


@dataclass(frozen=True)
class LabelledLog:
    """The chosen questions' labels against their scores: ``labelled`` (weighted), and how many
    are ``unsure`` or still ``missing``."""

    selection: Selection
    labelled: tuple[LabelledScore, ...]
    unsure: int
    missing: int

    def point(self) -> Any:
        """The weighted conformal operating point for the selection's budget."""
        return weighted_point(self.labelled, self.selection.budget, self.selection.test_weight)


def labelled_log(
    root: str | os.PathLike[str], log_labels: Mapping[str, str] | None = None
) -> LabelledLog | None:
    """The labels given so far to the questions chosen in ``root`` (``labels.jsonl``, else a label
    the log itself carried); ``None`` when nothing was chosen there."""
    selection = read_selection(root)
    if selection is None:
        return None
    given = {**(log_labels or {}), **read_labels(root)}
    labelled = tuple(
        LabelledScore(score=selection.scores[qid], label=given[qid], weight=weight)
        for qid, weight in selection.chosen.items()
        if given.get(qid) in ("in_scope", "out_of_scope")
    )
    unsure = sum(given.get(qid) == "unsure" for qid in selection.chosen)
    return LabelledLog(
        selection=selection,
        labelled=labelled,
        unsure=unsure,
        missing=len(selection.chosen) - len(labelled) - unsure,
    )


class LogStage:
    """The query log's part of a calibration run: its chosen questions and its labels (see the
    module docstring), and what the profile records of them (``sources``, ``data``)."""

    def __init__(
        self, root: Path, cfg: CalibrationConfig, hedge_budget: float | None, notes: list[str]
    ) -> None:
        self.root = root
        self.cfg = cfg
        self.hedge_budget = hedge_budget
        self.notes = notes
        self.to_label: str | None = None
        self.sources: tuple[str, ...] = ()
        self.data: dict[str, str] = {}

    def labels(
        self,
        logged: Sequence[LogQuestion],
        reading: Reading[LogQuestion],
        detector: Any,
        identity: Mapping[str, str],
    ) -> tuple[tuple[LabelledScore, ...], float]:
        """The log's labelled questions (weighted as they were chosen, with ``select``) and the
        weight of the new answerable question a conformal rule counts at the top; with ``select``,
        the questions to label are chosen first (``to_label.jsonl``)."""
        cfg, log = self.cfg, Path(str(self.cfg.questions))
        retrieved = sum(q.retrieved for q in logged)
        self.sources = (
            f"{len(logged)} questions of the query log {log}"
            + (f", {retrieved} read against the top {cfg.k} passages of {cfg.retriever}" if retrieved else "")
            + f"; {len(reading.scored)} read",
        )
        self.data = {"log": corpus_sha256(log)}
        scores = {q.id: s for q, s in reading.scored}
        if cfg.select is not None:
            selection = write_selection(
                self.root,
                logged,
                scores,
                cfg.select,
                detector=str(detector.name),
                identity=identity,
                budget=cfg.budget,
                hedge_budget=self.hedge_budget,
                seed=cfg.seed,
                log=self.data["log"],
            )
            self.to_label = str(self.root / TO_LABEL_FILE)
            given = labelled_log(self.root, {q.id: q.logged.label for q in logged if q.logged.label})
            assert given is not None  # the selection was just written
            labelled, test_weight = given.labelled, selection.test_weight
            if given.missing:
                self.notes.append(
                    f"{given.missing} of the {len(selection.chosen)} questions chosen to label have no label "
                    f"yet ({self.to_label}: scopeguard review {self.root})"
                )
            if given.unsure:
                self.notes.append(f"{given.unsure} chosen questions were labelled unsure and are left out")
        else:
            labelled = tuple(
                LabelledScore(score=s, label=str(q.label), weight=1.0) for q, s in reading.scored if q.label
            )
            test_weight = TEST_POINT
        if labelled:
            self.sources += (f"{len(labelled)} of them labelled by people",)
        return tuple(labelled), test_weight
