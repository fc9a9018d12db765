"""Metrics for out-of-scope detectors: accuracy, OOS precision/recall/F1, false refusals, AUROC, latency.

``detection_metrics(y_true, verdicts)`` is the one entry point used by ``eval-detector``, the
benchmarks and the other evaluators. Conventions:

* the positive class is ``out_of_scope``;
* a verdict labelled ``unknown`` counts as wrong for accuracy and as "not flagged" for
  precision/recall (a detector cannot improve its figures by abstaining); ``unknown_rate``
  reports how often it happened;
* ``false_refusal_rate``: the share of in-scope questions labelled ``out_of_scope`` (``nan``
  without in-scope questions);
* AUROC uses ``Verdict.score`` (P(out of scope)); verdicts without a score are left out of it,
  ties count one half (the Mann-Whitney statistic). It is ``nan`` when the scored verdicts do
  not contain both classes;
* ``recall_oos_at_fr10``: the out-of-scope recall ("caught") at the threshold on the score that
  refuses at most 10% of the in-scope questions, chosen in hindsight on these very questions (the
  best a calibration profile with a 10% budget could do here; see
  :func:`recall_at_false_refusals`);
* ``hedged_share``: the share of verdicts in a calibration profile's hedge band
  (:attr:`~scopeguard.types.Verdict.hedge`; 0 without a profile);
* latencies are ``Verdict.latency_ms``; percentiles use linear interpolation (numpy default).

The primary metric is :data:`PRIMARY_METRIC` (``accuracy``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from scopeguard import _progress
from scopeguard.detection.head import calibration
from scopeguard.errors import DetectionError, InputError, LLMError, error_kind
from scopeguard.types import Document, Verdict

if TYPE_CHECKING:
    from scopeguard.data import Dataset
    from scopeguard.detection.detectors.base import Detector

logger = logging.getLogger(__name__)

__all__ = [
    "METRIC_NAMES",
    "PRIMARY_METRIC",
    "auroc",
    "bootstrap_ci",
    "correctness",
    "detect_or_unknown",
    "detection_metrics",
    "latency_percentiles",
    "per_question_records",
    "recall_at_false_refusals",
    "run_detector",
]

PRIMARY_METRIC = "accuracy"
METRIC_NAMES = (
    "n",
    "accuracy",
    "precision_oos",
    "recall_oos",
    "f1_oos",
    "false_refusal_rate",
    "recall_oos_at_fr10",
    "auroc",
    "unknown_rate",
    "hedged_share",
    "latency_ms_p50",
    "latency_ms_p95",
    "escalated_share",
    "llm_calls_mean",
)
_VALID_TRUE = ("in_scope", "out_of_scope")


def _check_labels(y_true: Sequence[str]) -> None:
    bad = sorted({str(y) for y in y_true if y not in _VALID_TRUE})
    if bad:
        raise InputError(f"true labels must be 'in_scope' or 'out_of_scope', got {', '.join(map(repr, bad))}")


def auroc(y_true: Sequence[str], scores: Sequence[float]) -> float:
    """Area under the ROC curve of ``scores`` (higher = more out of scope); ties count 1/2.

    The labelled form of :func:`scopeguard.detection.head.calibration.auroc`: ``y_true`` holds
    ``"in_scope"`` / ``"out_of_scope"``. Returns ``nan`` when ``y_true`` lacks one of the two classes.
    """
    if len(y_true) != len(scores):
        raise InputError(f"auroc: {len(y_true)} labels but {len(scores)} scores")
    _check_labels(y_true)
    return calibration.auroc(
        np.asarray(scores, dtype=float), np.asarray([y == "out_of_scope" for y in y_true], dtype=int)
    )


def recall_at_false_refusals(
    y_true: Sequence[str], scores: Sequence[float | None], max_false_refusals: float = 0.10
) -> float:
    """The out-of-scope recall at the lowest threshold on ``scores`` that refuses at most
    ``max_false_refusals`` of the in-scope questions, chosen in hindsight on these questions.

    A question is refused when its score is at or above the threshold; one without a score (a
    failed read) is never refused: an in-scope one still counts among the in-scope questions, an
    out-of-scope one is missed. Returns ``nan`` without questions of both classes or without scores.
    """
    if len(y_true) != len(scores):
        raise InputError(f"recall_at_false_refusals: {len(y_true)} labels but {len(scores)} scores")
    if not 0.0 <= max_false_refusals < 1.0:
        raise InputError(f"max_false_refusals must be in [0, 1), got {max_false_refusals}")
    _check_labels(y_true)
    n_in = sum(1 for y in y_true if y == "in_scope")
    if not n_in or n_in == len(y_true) or all(s is None for s in scores):
        return math.nan
    # a question without a score is never refused: it reads as the lowest score there is
    p = [-math.inf if s is None else float(s) for s in scores]
    return calibration.caught_at(p, [int(y == "out_of_scope") for y in y_true], max_false_refusals)


def latency_percentiles(latencies_ms: Sequence[float], qs: Sequence[float] = (50, 95)) -> dict[str, float]:
    """``{"latency_ms_p50": ..., "latency_ms_p95": ...}`` (``nan`` for an empty sequence)."""
    arr = np.asarray(latencies_ms, dtype=float)
    return {f"latency_ms_p{q:g}": (float(np.percentile(arr, q)) if arr.size else math.nan) for q in qs}


def bootstrap_ci(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], float] = np.mean,  # type: ignore[assignment]
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``statistic`` over ``values``.

    For accuracy pass the per-question correctness (1.0 / 0.0). Seeded: same input, same interval.
    """
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise InputError(f"n_resamples must be >= 1, got {n_resamples}")
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise InputError("bootstrap_ci needs at least one value")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    stats = np.array([statistic(arr[row]) for row in idx], dtype=float)
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))


def correctness(y_true: Sequence[str], verdicts: Sequence[Verdict]) -> list[float]:
    """1.0 where the verdict's label equals the true label, else 0.0 (``unknown`` is wrong)."""
    if len(y_true) != len(verdicts):
        raise InputError(f"correctness: {len(y_true)} labels but {len(verdicts)} verdicts")
    return [1.0 if v.label == y else 0.0 for y, v in zip(y_true, verdicts, strict=True)]


def detection_metrics(y_true: Sequence[str], verdicts: Sequence[Verdict]) -> dict[str, float]:
    """All detection figures for ``verdicts`` against the true labels (see the module docstring)."""
    if len(y_true) != len(verdicts):
        raise InputError(f"detection_metrics: {len(y_true)} labels but {len(verdicts)} verdicts")
    if not verdicts:
        raise InputError("detection_metrics: no verdicts to evaluate")
    _check_labels(y_true)
    for i, v in enumerate(verdicts):
        if not isinstance(v, Verdict):
            raise InputError(f"detection_metrics: item {i} is a {type(v).__name__}, not a Verdict")
    n = len(verdicts)
    pairs = list(zip(y_true, verdicts, strict=True))
    tp = sum(1 for y, v in pairs if y == "out_of_scope" and v.label == "out_of_scope")
    fp = sum(1 for y, v in pairs if y == "in_scope" and v.label == "out_of_scope")
    fn = sum(1 for y, v in pairs if y == "out_of_scope" and v.label != "out_of_scope")
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    n_in = sum(1 for y in y_true if y == "in_scope")
    scored = [(y, v.score) for y, v in pairs if v.score is not None]
    out: dict[str, float] = {
        "n": float(n),
        "accuracy": sum(correctness(y_true, verdicts)) / n,
        "precision_oos": precision,
        "recall_oos": recall,
        "f1_oos": f1,
        # in-scope questions the guard would refuse (an unknown is not a refusal)
        "false_refusal_rate": fp / n_in if n_in else math.nan,
        "recall_oos_at_fr10": recall_at_false_refusals(y_true, [v.score for v in verdicts]),
        "auroc": auroc([y for y, _ in scored], [float(s) for _, s in scored]) if scored else math.nan,
        "unknown_rate": sum(1 for v in verdicts if v.label == "unknown") / n,
        "hedged_share": sum(1 for v in verdicts if v.hedge) / n,
    }
    out.update(latency_percentiles([v.latency_ms for v in verdicts]))
    out["escalated_share"] = sum(1 for v in verdicts if v.escalated) / n
    out["llm_calls_mean"] = sum(v.llm_calls for v in verdicts) / n
    return out


def run_detector(
    detector: Detector,
    dataset: Dataset,
    *,
    limit: int | None = None,
    progress: bool | None = None,
) -> tuple[list[str], list[Verdict]]:
    """Run ``detector`` on each question of ``dataset`` against its own document.

    Returns the true labels and the verdicts, in question order (the first ``limit`` questions
    when given). A question whose detector call fails with an LLM or detection error gets an
    ``unknown`` verdict carrying the error (counted by ``unknown_rate``); other errors propagate.
    ``progress=None`` shows a bar only on a terminal.
    """
    from tqdm import tqdm

    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    questions = list(dataset.questions[:limit] if limit else dataset.questions)
    show = _progress.show_progress(progress)
    y_true: list[str] = []
    verdicts: list[Verdict] = []
    for q in tqdm(questions, desc=f"detect ({detector.name})", disable=not show):
        y_true.append(q.label)
        verdicts.append(detect_or_unknown(detector, q.question, [dataset.documents[q.doc_id]], q.id))
    return y_true, verdicts


def detect_or_unknown(
    detector: Detector, question: str, documents: Sequence[Document], question_id: str
) -> Verdict:
    """``detector.detect(question, documents)``; an LLM or detection error becomes an ``unknown``
    verdict carrying it (logged with ``question_id``), other errors propagate."""
    try:
        return detector.detect(question, documents)
    except (LLMError, DetectionError) as exc:
        logger.warning("question %s: %s failed: %s", question_id, detector.name, exc)
        return Verdict(
            label="unknown",
            detector=detector.name,
            error=f"{type(exc).__name__}: {exc}",
            error_kind=error_kind(exc),
        )


def per_question_records(
    dataset_name: str, dataset: Dataset, verdicts: Sequence[Verdict]
) -> list[dict[str, object]]:
    """One JSON-able record per question: id, true label, verdict label, score, stage, hedge,
    uncovered, latency, escalation and error (the rows of ``eval-detector --per-question``)."""
    out: list[dict[str, object]] = []
    for q, v in zip(dataset.questions, verdicts, strict=False):
        out.append(
            {
                "dataset": dataset_name,
                "id": q.id,
                "doc_id": q.doc_id,
                "label": q.label,
                "predicted": v.label,
                "correct": v.label == q.label,
                "score": v.score,
                "stage": v.stage or v.detector,
                "escalated": v.escalated,
                "hedge": v.hedge,
                "uncovered": list(v.uncovered),
                "latency_ms": round(v.latency_ms, 3),
                "llm_calls": v.llm_calls,
                "error": v.error,
            }
        )
    return out
