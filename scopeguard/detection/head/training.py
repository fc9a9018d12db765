"""Training and cross-validating the learned detectors (``nli``, ``probe``).

Splits are grouped by document: a document's questions are never on both sides of a split.
Features are extracted once and cached on disk (see :mod:`scopeguard.detection.read`), so re-runs
and the folds of a cross-validation pay only for the MLP.

>>> train_detector("data/dev", "probe", "heads/probe-qwen")          # doctest: +SKIP
>>> train_detector("data/dev", "probe", "heads/probe-l4", layer=-4)  # doctest: +SKIP
>>> verdicts = cross_validate("data/dev", "nli", folds=5, embedding_model="minilm")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.data import Dataset, load_dataset
from scopeguard.detection.head.calibration import grouped_folds, grouped_split
from scopeguard.detection.head.mlp import TrainedHead, TrainSettings, train_head
from scopeguard.detection.read import FeatureExtractor, get_extractor
from scopeguard.errors import ConfigurationError, DatasetError
from scopeguard.types import Label, Verdict

__all__ = [
    "LEARNED_DETECTORS",
    "cross_validate",
    "dataset_features",
    "grouped_folds",
    "grouped_split",
    "train_detector",
]

logger = logging.getLogger(__name__)

LEARNED_DETECTORS: tuple[str, ...] = ("nli", "probe")
_SETTINGS = {f.name for f in dataclasses.fields(TrainSettings)}


def _as_dataset(dataset: Dataset | str | os.PathLike[str]) -> Dataset:
    return dataset if isinstance(dataset, Dataset) else load_dataset(dataset)


def _check_detector(detector: str) -> None:
    if detector not in LEARNED_DETECTORS:
        raise ConfigurationError(
            f"{detector!r} is not a trainable detector; valid: {', '.join(LEARNED_DETECTORS)}"
        )


def _split_kwargs(seed: int, kw: dict[str, Any]) -> tuple[TrainSettings, dict[str, Any]]:
    settings = TrainSettings(seed=seed, **{k: v for k, v in kw.items() if k in _SETTINGS and k != "seed"})
    return settings, {k: v for k, v in kw.items() if k not in _SETTINGS}


def dataset_features(
    dataset: Dataset | str | os.PathLike[str],
    detector: str,
    *,
    progress: bool | None = None,
    **extractor_kwargs: Any,
) -> tuple[np.ndarray, np.ndarray, list[str], FeatureExtractor]:
    """``(X, y, doc_ids, extractor)`` for every question with its own document (y = 1: out of scope)."""
    _check_detector(detector)
    ds = _as_dataset(dataset)
    extractor = get_extractor(detector, **extractor_kwargs)
    pairs = [(q.question, d) for q, d in ds.pairs()]
    x = extractor.batch_features(pairs, progress=progress)
    y = np.array([1.0 if q.label == "out_of_scope" else 0.0 for q in ds.questions], dtype=np.float32)
    return x, y, [q.doc_id for q in ds.questions], extractor


def _fit(
    x: np.ndarray,
    y: np.ndarray,
    groups: list[str],
    idx: np.ndarray,
    detector: str,
    identity: dict[str, Any],
    settings: TrainSettings,
    val_fraction: float,
    progress: bool | None,
) -> TrainedHead:
    sub_groups = [groups[i] for i in idx]
    if len(set(sub_groups)) >= 2:
        tr, va = grouped_split(sub_groups, val_fraction, seed=settings.seed)
        tr, va = idx[tr], idx[va]
    else:
        tr, va = idx, idx[:0]
    if len(set(y[tr].tolist())) < 2:
        raise DatasetError("the training split has only one label; need both in_scope and out_of_scope")
    return train_head(
        x[tr], y[tr], x[va], y[va], detector=detector, features=identity, settings=settings, progress=progress
    )


def train_detector(
    dataset: Dataset | str | os.PathLike[str],
    detector: str,
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    val_fraction: float = 0.1,
    progress: bool | None = None,
    **kw: Any,
) -> Path:
    """Train a head for ``detector`` on ``dataset`` and save it to ``out_dir``; returns ``out_dir``.

    ``kw`` takes the training settings of :class:`~scopeguard.detection.head.mlp.TrainSettings`
    (``epochs``, ``lr``, ``batch_size``, ``hidden``, ``dropout``, ``weight_decay``) and the
    feature extractor's options (nli: ``embedding_model``, ``pooling``; probe: ``llm``,
    ``backend``, ``layer``, ``token``, ``template``, ``max_tokens``, ``n_threads``). A
    document-grouped ``val_fraction`` of the documents picks the best epoch. The head records the
    extractor's identity (for the probe, its ``layer``), so loading it rebuilds the same features.
    """
    _check_detector(detector)
    ds = _as_dataset(dataset)
    settings, extractor_kwargs = _split_kwargs(seed, kw)
    x, y, groups, extractor = dataset_features(ds, detector, progress=progress, **extractor_kwargs)
    head = _fit(
        x, y, groups, np.arange(len(y)), detector, extractor.identity, settings, val_fraction, progress
    )
    head = head.with_updates(metrics={**head.config.metrics, "n_documents": float(len(set(groups)))})
    return head.save(out_dir)


def cross_validate(
    dataset: Dataset | str | os.PathLike[str],
    detector_name: str,
    folds: int = 5,
    seed: int = 0,
    *,
    val_fraction: float = 0.1,
    progress: bool | None = None,
    **kw: Any,
) -> list[Verdict]:
    """Document-grouped k-fold: one out-of-fold :class:`Verdict` per question, in dataset order.

    Takes the same ``kw`` as :func:`train_detector`. Each fold trains on the other folds (with a
    document-grouped validation part for the best epoch) and predicts the held-out documents.
    """
    _check_detector(detector_name)
    ds = _as_dataset(dataset)
    settings, extractor_kwargs = _split_kwargs(seed, kw)
    x, y, groups, extractor = dataset_features(ds, detector_name, progress=progress, **extractor_kwargs)
    verdicts: list[Verdict | None] = [None] * len(y)
    for k, test in enumerate(grouped_folds(groups, folds, seed=seed)):
        train = np.setdiff1d(np.arange(len(y)), test)
        head = _fit(x, y, groups, train, detector_name, extractor.identity, settings, val_fraction, progress)
        for i, p in zip(test, head.predict_proba(x[test]), strict=True):
            label: Label = "out_of_scope" if p >= head.threshold else "in_scope"
            verdicts[i] = Verdict(
                label=label,
                score=float(np.clip(p, 0.0, 1.0)),
                rationale=f"P(out of scope) = {p:.3f}, out-of-fold prediction (fold {k + 1} of {folds})",
                detector=detector_name,
            )
    return [v for v in verdicts if v is not None]
