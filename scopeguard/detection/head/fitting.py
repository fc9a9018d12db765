"""Fitting the scoring detectors (``fast``, ``logprob``, ``default``) on labelled datasets.

``fit_detector(["data/squad2-train", "data/eloq-dev"], "default", "heads/mine")`` extracts the
signals (cached: see :mod:`scopeguard.detection.signals`), fits the head with document-grouped
cross-validation, saves it under ``out`` and returns a :class:`FitReport` with the out-of-fold
operating point overall and per dataset (for ``default`` also leave-one-dataset-out: each
dataset scored by a head fitted on the others). The saved head loads by path:
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

from scopeguard.data import Dataset, load_dataset
from scopeguard.detection.head.calibration import choose_threshold, fit_logistic, grouped_oof, operating_point
from scopeguard.detection.signals import Signals, extract_signals, sample_documents
from scopeguard.errors import ConfigurationError

__all__ = ["SCORING_DETECTORS", "FitReport", "OutOfFold", "fit_detector", "load_signals"]

logger = logging.getLogger(__name__)

ScoringDetector = Literal["fast", "logprob", "default"]
#: the packaged default head's recipe, chosen in benchmarks/studies/reader_generalisation.py: the best worst
#: leave-one-dataset-out accuracy among the configurations no left-out set scores below the margin
#: alone on (the inference probe and the word-overlap features did not pass that test)
DEFAULT_SIGNALS: tuple[str, ...] = ("margin", "hidden")
DEFAULT_LAYER = 21
DEFAULT_L2 = 300.0
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
    max_docs: int | Sequence[int | None] | None = None,
    seed: int = 0,
    layers: Sequence[int] = (),
    probes: Sequence[str] = (),
    progress: bool | None = None,
) -> Signals:
    """Signals of every dataset (optionally ``max_docs`` documents of each, drawn with ``seed``;
    a sequence gives each dataset its own, ``None`` or 0 for all). ``layers``: hidden states to
    read with the margins (a llama.cpp reader built here); ``probes``: further verdict templates."""
    reader = None
    if read:
        from scopeguard.detection.read.reader import Reader
        from scopeguard.detection.read.scorer import verdict_scorer

        extra = {"layers": tuple(layers)} if layers and (llm is None or isinstance(llm, str)) else {}
        reader = Reader(verdict_scorer(llm, **extra))
    limits = list(max_docs) if isinstance(max_docs, Sequence) else [max_docs] * len(datasets)
    if len(limits) != len(datasets):
        raise ConfigurationError(f"{len(limits)} max_docs values for {len(datasets)} datasets")
    parts = []
    for i, (ds, limit) in enumerate(zip(datasets, limits, strict=True)):
        name, data = _named(ds, i)
        data = sample_documents(data, limit or None, seed=seed)
        logger.info("%s: %d questions on %d documents", name, len(data.questions), len(data.documents))
        parts.append(
            extract_signals(data, name=name, fast=fast, reader=reader, probes=probes, progress=progress)
        )
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
    max_docs: int | Sequence[int | None] | None = None,
    folds: int = 5,
    seed: int = 0,
    balance: bool = True,
    signals: Sequence[str] = DEFAULT_SIGNALS,
    layer: int | None = DEFAULT_LAYER,
    l2: float = DEFAULT_L2,
    same_source: dict[str, str] | None = None,
    max_false_refusal: float | None = None,
    threshold_on: str = "cv",
    platt_lodo: bool = False,
    progress: bool | None = None,
) -> FitReport:
    """Fit ``detector``'s head on ``datasets`` and save it to ``out`` (see the module docstring).

    ``signals``, ``layer`` and ``l2`` apply to ``default`` (see
    :func:`~scopeguard.detection.head.default.fit_default_head`; the defaults are the packaged head's
    recipe). ``same_source`` maps dataset names to the name they are left out with in the
    leave-one-dataset-out report (``{"squad2-train-extra": "squad2-train"}``). ``max_false_refusal``
    bounds ``default``'s out-of-fold false-refusal rate on every dataset when its threshold is chosen,
    on the document-grouped CV scores or, with ``threshold_on="lodo"``, on the leave-one-dataset-out
    ones (``default`` only); ``platt_lodo`` Platt-scales ``default``'s head on its
    leave-one-dataset-out scores.
    """
    if (threshold_on != "cv" or platt_lodo) and detector != "default":
        raise ConfigurationError("threshold_on and platt_lodo apply to the default detector only")
    if detector not in SCORING_DETECTORS:
        raise ConfigurationError(
            f"{detector!r} is not a scoring detector; valid: {', '.join(SCORING_DETECTORS)}"
        )
    if not datasets:
        raise ConfigurationError("fit_detector needs at least one dataset")
    if detector == "default":
        from scopeguard.detection.signals import INFERENCE_TEMPLATE, READ_FEATURES

        bad = [s for s in signals if s not in READ_FEATURES]
        if bad or not signals:
            raise ConfigurationError(f"signals must be among {', '.join(READ_FEATURES)}, got {list(signals)}")
    reads_hidden = detector == "default" and "hidden" in signals
    if reads_hidden and layer is None:
        raise ConfigurationError("the hidden-state signal needs a layer")
    loaded = load_signals(
        datasets,
        fast=detector == "fast",
        read=detector in ("logprob", "default"),
        llm=llm,
        max_docs=max_docs,
        seed=seed,
        layers=(layer,) if reads_hidden and layer is not None else (),
        probes=(INFERENCE_TEMPLATE,) if detector == "default" and "inference_margin" in signals else (),
        progress=progress,
    )
    y = loaded.labels
    if len(set(y.tolist())) < 2:
        raise ConfigurationError("the datasets need both in-scope and out-of-scope questions")
    w = _weights(loaded, balance)
    groups = loaded.groups
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {
        "datasets": list(dict.fromkeys(loaded.datasets)),  # in the order given, as max_docs
        "n": len(loaded),
        "max_docs": max_docs if not isinstance(max_docs, Sequence) else list(max_docs),
        "seed": seed,
        "folds": folds,
        "balance": balance,
    }

    if detector == "default":
        from scopeguard.detection.head.default import fit_default_head
        from scopeguard.detection.read.scorer import verdict_scorer

        model_name = verdict_scorer(llm).name
        resolved = loaded.layers[0] if reads_hidden else None
        head, report = fit_default_head(
            loaded,
            verdict_model=model_name,
            names=tuple(signals),
            layer=resolved,
            l2=l2,
            dataset_of=same_source,
            max_false_refusal=max_false_refusal,
            threshold_on=threshold_on,
            platt_lodo=platt_lodo,
            folds=folds,
            seed=seed,
            info=info,
        )
        path = head.save(target)
        cv = report.pop("out_of_fold")
        overall = dict(report["cv"]["overall"])
        per = {k: dict(v) for k, v in report["cv"]["per_dataset"].items()}
        for name, point in report.get("lodo", {}).items():
            if name in per:
                per[name]["lodo_accuracy"] = point["accuracy"]
                per[name]["lodo_auroc"] = point["auroc"]
        pred = np.asarray(cv["pred"], dtype=bool)
        oof = OutOfFold(loaded.ids, loaded.datasets, y, cv["p"], pred, np.ones(len(y), dtype=bool))
        return FitReport("default", path, len(loaded), overall, per, report, oof)

    names_ = ("coverage", "alignment") if detector == "fast" else ("margin",)
    x = loaded.matrix(names_)

    def fp(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return fit_logistic(x[tr], y[tr], names_, weights=w[tr]).predict(x[te])

    p = grouped_oof(len(y), groups, fp, folds=folds, seed=seed)
    threshold = choose_threshold(p, y, w)
    pred = p >= threshold
    overall = operating_point(p, y, threshold).to_dict()
    per = _per_dataset(loaded, pred, p)
    final = fit_logistic(x, y, names_, weights=w)
    info["cv"] = {"overall": overall, "per_dataset": per}
    if detector == "fast":
        from scopeguard.detection.head.fast import FastHead

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
        from scopeguard.detection.head.logprob import LogProbHead
        from scopeguard.detection.read.scorer import verdict_scorer

        scorer_name = verdict_scorer(llm).name
        path = LogProbHead(model=scorer_name, calibration=final, threshold=threshold, info=info).save(target)
    oof = OutOfFold(loaded.ids, loaded.datasets, y, p, pred, np.zeros(len(y), dtype=bool))
    return FitReport(detector, path, len(loaded), overall, per, {"threshold": threshold}, oof)
