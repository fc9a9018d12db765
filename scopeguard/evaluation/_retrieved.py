"""A detector read as it runs in production: each question against the top-k retrieved documents.

``eval-detector`` reads each question against its own (gold) document. In a RAG pipeline the guard
sees what a retriever returned instead, so :func:`read_retrieved` indexes a dataset's documents with
a retriever (default :data:`~scopeguard.retrieval.registry.DEFAULT_RETRIEVER`), retrieves the top
``k`` for each question and runs ``detector.detect(question, those k documents)``, as the
:class:`~scopeguard.Guard` does. The truth follows what the guard was shown
(:func:`retrieved_truth`): a question is in scope only when it is answerable (labelled
``in_scope``) *and* its own document is among the ``k`` retrieved; otherwise it is out of scope.

:func:`retrieved_metrics` reports :func:`~scopeguard.evaluation.detection.detection_metrics` on
that truth, plus ``k``; ``answerable`` (questions labelled in scope), ``recall_at_k`` (the share
of them whose document was retrieved; ``nan`` without any), ``answerable_not_retrieved`` and
``in_scope`` (answerable and retrieved) as counts; ``false_refusals_at_threshold`` and
``caught_at_threshold`` (out-of-scope recall) at the detector's own threshold and, for a detector
under a calibration profile, ``false_refusals_at_profile`` and ``caught_at_profile`` at the
profile's. ``recall_oos_at_fr10`` stays the hindsight figure (caught at <= 10% false refusals).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scopeguard import _progress
from scopeguard.errors import InputError
from scopeguard.evaluation.detection import detect_or_unknown, detection_metrics, per_question_records
from scopeguard.retrieval.base import check_k, retrieve
from scopeguard.retrieval.registry import DEFAULT_RETRIEVER, get_retriever
from scopeguard.types import Document, Verdict

if TYPE_CHECKING:
    from scopeguard.data import Dataset
    from scopeguard.detection.detectors.base import Detector
    from scopeguard.retrieval.base import Retriever

__all__ = [
    "RETRIEVED_METRIC_NAMES",
    "RetrievedQuestion",
    "read_retrieved",
    "retrieve_top_k",
    "retrieved_metrics",
    "retrieved_records",
    "retrieved_truth",
]

RETRIEVED_METRIC_NAMES = (
    "k",
    "answerable",
    "recall_at_k",
    "answerable_not_retrieved",
    "in_scope",
    "false_refusals_at_threshold",
    "caught_at_threshold",
    "false_refusals_at_profile",
    "caught_at_profile",
)
"""The figures :func:`retrieved_metrics` adds to ``detection_metrics`` (the ``_at_profile`` ones
only for a detector under a calibration profile)."""


_NOTHING = "InputError: the retriever returned no documents for this question"


def retrieved_truth(label: str, doc_id: str, retrieved: Sequence[str]) -> str:
    """``in_scope`` when the question is answerable (``label``) and its document ``doc_id`` is
    among the ``retrieved`` ids; ``out_of_scope`` otherwise."""
    return "in_scope" if label == "in_scope" and doc_id in retrieved else "out_of_scope"


@dataclass(frozen=True)
class RetrievedQuestion:
    """One question read against the documents retrieved for it.

    ``label`` is the dataset's label, ``retrieved`` the ids of the top-k documents in rank order,
    ``verdict`` the verdict the guard acts on (labelled by the calibration profile, when there is
    one) and ``at_threshold`` the label at the detector's own threshold.
    """

    id: str
    doc_id: str
    label: str
    retrieved: tuple[str, ...]
    verdict: Verdict
    at_threshold: str

    @property
    def gold_retrieved(self) -> bool:
        """Whether the question's own document is among the retrieved ones."""
        return self.doc_id in self.retrieved

    @property
    def truth(self) -> str:
        """The true label given what was retrieved (:func:`retrieved_truth`)."""
        return retrieved_truth(self.label, self.doc_id, self.retrieved)


def retrieve_top_k(
    retriever: Retriever, documents: Sequence[Document], questions: Sequence[str], k: int
) -> list[tuple[str, ...]]:
    """Index ``documents`` with ``retriever`` and return the ids of the top ``k`` for each of
    ``questions``, in rank order (fewer when the corpus is smaller)."""
    return [tuple(h.document.id for h in hits) for hits in retrieve(retriever, documents, questions, k)]


def read_retrieved(
    detector: Detector,
    dataset: Dataset,
    *,
    k: int,
    retriever: str | Retriever = DEFAULT_RETRIEVER,
    limit: int | None = None,
    progress: bool | None = None,
) -> list[RetrievedQuestion]:
    """Retrieve the top ``k`` of ``dataset``'s documents for each question and read the question
    against them with ``detector`` (see the module docstring), in question order (the first
    ``limit`` questions when given).

    A detector under a calibration profile is run once: the verdict's label comes from the
    profile, ``at_threshold`` from the detector it wraps. A question whose read fails with an LLM
    or detection error, or for which the retriever returned nothing, gets an ``unknown`` verdict
    carrying the error.
    """
    from tqdm import tqdm

    from scopeguard.detection.profile import CalibratedDetector

    check_k(k)
    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    index = get_retriever(retriever) if isinstance(retriever, str) else retriever
    questions = list(dataset.questions[:limit] if limit else dataset.questions)
    top = retrieve_top_k(index, list(dataset.documents.values()), [q.question for q in questions], k)
    inner = detector.detector if isinstance(detector, CalibratedDetector) else detector
    show = _progress.show_progress(progress)
    out: list[RetrievedQuestion] = []
    for q, ids in tqdm(
        list(zip(questions, top, strict=True)), desc=f"detect ({detector.name}, top {k})", disable=not show
    ):
        if ids:
            raw = detect_or_unknown(inner, q.question, [dataset.documents[i] for i in ids], q.id)
        else:  # the guard is given nothing to check against: it would refuse the call
            raw = Verdict(label="unknown", detector=inner.name, error=_NOTHING, error_kind="bad_input")
        verdict = detector.relabel(raw) if isinstance(detector, CalibratedDetector) else raw
        out.append(RetrievedQuestion(q.id, q.doc_id, q.label, ids, verdict, raw.label))
    return out


def _rate(hits: int, n: int) -> float:
    return hits / n if n else math.nan


def retrieved_metrics(
    rows: Sequence[RetrievedQuestion], *, k: int, calibrated: bool = False
) -> dict[str, float]:
    """``detection_metrics`` on the retrieval-aware truth and the figures named in
    :data:`RETRIEVED_METRIC_NAMES` (see the module docstring); ``calibrated``: the verdicts'
    labels come from a calibration profile (adds the ``_at_profile`` figures)."""
    if not rows:
        raise InputError("retrieved_metrics: no questions to evaluate")
    truth = [r.truth for r in rows]
    out = detection_metrics(truth, [r.verdict for r in rows])
    answerable = sum(1 for r in rows if r.label == "in_scope")
    retrieved = sum(1 for r in rows if r.label == "in_scope" and r.gold_retrieved)
    n_in = truth.count("in_scope")
    n_out = len(truth) - n_in
    out.update(
        {
            "k": float(k),
            "answerable": float(answerable),
            "recall_at_k": _rate(retrieved, answerable),
            "answerable_not_retrieved": float(answerable - retrieved),
            "in_scope": float(n_in),
        }
    )
    labellings = {"threshold": [r.at_threshold for r in rows]}
    if calibrated:
        labellings["profile"] = [r.verdict.label for r in rows]
    for where, labels in labellings.items():
        pairs = list(zip(truth, labels, strict=True))
        refused = sum(1 for y, p in pairs if y == "in_scope" and p == "out_of_scope")
        caught = sum(1 for y, p in pairs if y == "out_of_scope" and p == "out_of_scope")
        out[f"false_refusals_at_{where}"] = _rate(refused, n_in)
        out[f"caught_at_{where}"] = _rate(caught, n_out)
    return out


def retrieved_records(
    dataset_name: str, dataset: Dataset, rows: Sequence[RetrievedQuestion]
) -> list[dict[str, Any]]:
    """``eval-detector --per-question`` rows for ``rows`` (the first questions of ``dataset``, in
    order): the usual fields, with ``correct`` judged against the retrieval-aware ``truth``, plus
    ``retrieved`` (the document ids in rank order), ``gold_retrieved`` and ``at_threshold``."""
    records = per_question_records(dataset_name, dataset, [r.verdict for r in rows])
    for record, row in zip(records, rows, strict=True):
        if record["id"] != row.id:
            raise InputError(f"retrieved_records: question {row.id!r} is not {record['id']!r}")
        record.update(
            truth=row.truth,
            correct=row.verdict.label == row.truth,
            retrieved=list(row.retrieved),
            gold_retrieved=row.gold_retrieved,
            at_threshold=row.at_threshold,
        )
    return records
