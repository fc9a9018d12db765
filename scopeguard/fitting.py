"""Fitting the scoring detectors (``fast``, ``logprob``, ``default``) on labelled datasets.

``fit_detector(["data/squad2-train", "data/eloq-dev"], "default", "heads/mine")`` extracts the
signals (cached: see :mod:`scopeguard.signals`), fits the head with document-grouped
cross-validation, saves it under ``out`` and returns a :class:`FitReport` with the out-of-fold
operating point overall and per dataset. The saved head loads by path:
``get_detector("default", model="heads/mine")``.

Each dataset weighs the same in the fit (``balance=True``) whatever its size, so that a large
set of one kind of question does not decide the threshold alone.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from scopeguard.calibration import choose_threshold, fit_logistic, grouped_oof, operating_point
from scopeguard.data import Dataset, load_dataset
from scopeguard.errors import ConfigurationError
from scopeguard.signals import Signals, extract_signals, sample_documents

__all__ = ["SCORING_DETECTORS", "FitReport", "OutOfFold", "fit_detector", "load_signals"]

logger = logging.getLogger(__name__)

ScoringDetector = Literal["fast", "logprob", "default"]
SCORING_DETECTORS: tuple[str, ...] = ("fast", "logprob", "default")


@dataclass(frozen=True)
class FitReport:
    """What :func:`fit_detector` fitted and how it did out of fold."""

    detector: str
    path: Path
    n: int
    overall: dict[str, Any]
    per_dataset: dict[str, dict[str, Any]]
    details: dict[str, Any] = field(default_factory=dict)
    oof: OutOfFold | None = None


@dataclass(frozen=True)
class OutOfFold:
    """Per-question out-of-fold predictions behind a :class:`FitReport` (for CIs and tables)."""

    ids: tuple[str, ...]
    datasets: tuple[str, ...]
    labels: np.ndarray
    p: np.ndarray
    pred: np.ndarray
    escalated: np.ndarray


def _named(dataset: Dataset | str | os.PathLike[str], i: int) -> tuple[str, Dataset]:
    if isinstance(dataset, Dataset):
        return f"dataset{i}", dataset
    return Path(dataset).name, load_dataset(dataset)


def load_signals(
    datasets: Sequence[Dataset | str | os.PathLike[str]],
    *,
    fast: bool,
    llm: Any = None,
    read: bool,
    max_docs: int | None = None,
    seed: int = 0,
    progress: bool | None = None,
) -> Signals:
    """Signals of every dataset (optionally ``max_docs`` documents of each, drawn with ``seed``)."""
    reader = None
    if read:
        from scopeguard.detectors.logprob import LogProbDetector

        reader = LogProbDetector(llm=llm)
    parts = []
    for i, ds in enumerate(datasets):
        name, data = _named(ds, i)
        data = sample_documents(data, max_docs, seed=seed)
        logger.info("%s: %d questions on %d documents", name, len(data.questions), len(data.documents))
        parts.append(extract_signals(data, name=name, fast=fast, reader=reader, progress=progress))
    return Signals.concat(parts)


def _weights(signals: Signals, balance: bool) -> np.ndarray:
    if not balance:
        return np.ones(len(signals))
    names = np.array(signals.datasets)
    w = np.ones(len(signals))
    for name in set(signals.datasets):
        mask = names == name
        w[mask] = 1.0 / mask.sum()
    return w * (len(w) / w.sum())


def _per_dataset(signals: Signals, pred: np.ndarray, p: np.ndarray) -> dict[str, dict[str, Any]]:
    names = np.array(signals.datasets)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(set(signals.datasets)):
        m = names == name
        y = signals.labels[m]
        point = operating_point(p[m], y, 0.5).to_dict()
        point.update(
            threshold=None,
            accuracy=float((pred[m] == (y == 1)).mean()),
            false_refusal_rate=float(pred[m][y == 0].mean()) if (y == 0).any() else float("nan"),
            oos_recall=float(pred[m][y == 1].mean()) if (y == 1).any() else float("nan"),
        )
        out[name] = point
    return out


def fit_detector(
    datasets: Sequence[Dataset | str | os.PathLike[str]],
    detector: str,
    out: str | os.PathLike[str],
    *,
    llm: Any = None,
    max_docs: int | None = None,
    folds: int = 5,
    seed: int = 0,
    balance: bool = True,
    escalation_cost: float = 0.01,
    fast_refuses: bool = False,
    progress: bool | None = None,
) -> FitReport:
    """Fit ``detector``'s head on ``datasets`` and save it to ``out`` (see the module docstring).

    ``escalation_cost`` and ``fast_refuses`` apply to ``default``: see
    :func:`~scopeguard.detectors.default.fit_default_head`.
    """
    if detector not in SCORING_DETECTORS:
        raise ConfigurationError(
            f"{detector!r} is not a scoring detector; valid: {', '.join(SCORING_DETECTORS)}"
        )
    if not datasets:
        raise ConfigurationError("fit_detector needs at least one dataset")
    signals = load_signals(
        datasets,
        fast=detector in ("fast", "default"),
        read=detector in ("logprob", "default"),
        llm=llm,
        max_docs=max_docs,
        seed=seed,
        progress=progress,
    )
    y = signals.labels
    if len(set(y.tolist())) < 2:
        raise ConfigurationError("the datasets need both in-scope and out-of-scope questions")
    w = _weights(signals, balance)
    groups = signals.groups
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    info = {
        "datasets": sorted(set(signals.datasets)),
        "n": len(signals),
        "max_docs": max_docs,
        "seed": seed,
        "folds": folds,
        "balance": balance,
    }

    if detector == "default":
        from scopeguard.detectors.default import fit_default_head
        from scopeguard.detectors.logprob import LogProbDetector

        model_name = LogProbDetector(llm=llm).scorer.name
        head, report = fit_default_head(
            signals.coverage,
            signals.alignment,
            signals.margin,
            y,
            groups,
            weights=w,
            verdict_model=model_name,
            escalation_cost=escalation_cost,
            fast_refuses=fast_refuses,
            folds=folds,
            seed=seed,
            info=info,
        )
        path = head.save(target)
        cv = report.pop("out_of_fold")
        overall = dict(report["cascade"])
        per = _per_dataset(signals, cv["pred"], cv["p"])
        esc = cv["escalated"]
        names = np.array(signals.datasets)
        for name in per:
            per[name]["escalated"] = float(esc[names == name].mean())
        overall["escalated"] = float(esc.mean())
        oof = OutOfFold(signals.ids, signals.datasets, y, cv["p"], cv["pred"], esc)
        details = {"band": [head.low, head.high], **report}
        return FitReport("default", path, len(signals), overall, per, details, oof)

    names_ = ("coverage", "alignment") if detector == "fast" else ("margin",)
    x = signals.matrix(names_)

    def fp(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return fit_logistic(x[tr], y[tr], names_, weights=w[tr]).predict(x[te])

    p = grouped_oof(len(y), groups, fp, folds=folds, seed=seed)
    threshold = choose_threshold(p, y, w)
    pred = p >= threshold
    overall = operating_point(p, y, threshold).to_dict()
    per = _per_dataset(signals, pred, p)
    final = fit_logistic(x, y, names_, weights=w)
    info["cv"] = {"overall": overall, "per_dataset": per}
    if detector == "fast":
        from scopeguard.detectors.fast import FastHead

        fast_head = FastHead(
            features=final.features,
            mean=final.mean,
            scale=final.scale,
            coef=final.coef,
            intercept=final.intercept,
            threshold=threshold,
            encoder="minilm",
            info=info,
        )
        path = fast_head.save(target)
    else:
        from scopeguard.detectors.logprob import LogProbDetector, LogProbHead

        scorer_name = LogProbDetector(llm=llm).scorer.name
        path = LogProbHead(model=scorer_name, calibration=final, threshold=threshold, info=info).save(target)
    oof = OutOfFold(signals.ids, signals.datasets, y, p, pred, np.zeros(len(y), dtype=bool))
    return FitReport(detector, path, len(signals), overall, per, {"threshold": threshold}, oof)
