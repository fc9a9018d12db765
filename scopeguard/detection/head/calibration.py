"""Calibration and small heads over detector scores, fitted with document-grouped CV.

Every scoring detector turns a raw signal (a log-prob margin, a feature vector) into
P(out of scope) and a label. This module fits the pieces, in numpy only:

- :func:`fit_logistic`: L2-regularised logistic regression (Newton steps) on standardised
  features; a :class:`LogisticHead` predicts P(out of scope). With one feature it is Platt
  scaling.
- :func:`choose_threshold`: the P(out of scope) threshold with the best accuracy on
  out-of-fold scores (ties: the one nearest 0.5).
- :func:`operating_point`: accuracy, false-refusal rate (in-scope questions called out of
  scope), out-of-scope recall and AUROC at a threshold, the figures a head is saved with.
- :func:`grouped_oof`: out-of-fold predictions, folds grouped by document.

Labels are 1 for out of scope, 0 for in scope.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from scopeguard.errors import ConfigurationError, DatasetError, ModelError

__all__ = [
    "LogisticHead",
    "OperatingPoint",
    "auroc",
    "caught_at",
    "choose_threshold",
    "dataset_oof",
    "fit_logistic",
    "grouped_folds",
    "grouped_oof",
    "grouped_split",
    "head_file",
    "load_head_file",
    "operating_point",
    "platt",
    "read_head_file",
    "rescale_probability",
    "rescaled",
    "write_head_file",
]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0)))


@dataclass(frozen=True)
class LogisticHead:
    """P(out of scope) = sigmoid(coef . (x - mean) / scale + intercept)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def __post_init__(self) -> None:
        n = len(self.features)
        if not n or any(len(v) != n for v in (self.mean, self.scale, self.coef)):
            raise ModelError("logistic head: features, mean, scale and coef must have the same length")
        if any(not s > 0 for s in self.scale):
            raise ModelError("logistic head: scale values must be positive")

    def predict(self, x: np.ndarray | Sequence[float]) -> np.ndarray:
        """P(out of scope) for rows of ``x`` (``(n, k)``, or one row of ``k``)."""
        arr = np.atleast_2d(np.asarray(x, dtype=np.float64))
        z = (arr - np.asarray(self.mean)) / np.asarray(self.scale) @ np.asarray(self.coef) + self.intercept
        return np.asarray(_sigmoid(z))

    def predict_one(self, values: dict[str, float]) -> float:
        return float(self.predict([values[f] for f in self.features])[0])

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LogisticHead:
        try:
            return cls(
                features=tuple(str(f) for f in raw["features"]),
                mean=tuple(float(v) for v in raw["mean"]),
                scale=tuple(float(v) for v in raw["scale"]),
                coef=tuple(float(v) for v in raw["coef"]),
                intercept=float(raw["intercept"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"not a valid logistic head ({type(exc).__name__}: {exc})") from None


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    features: Sequence[str],
    *,
    weights: np.ndarray | None = None,
    l2: float = 1e-2,
    iterations: int = 50,
    penalty: Sequence[float] | None = None,
) -> LogisticHead:
    """Fit a :class:`LogisticHead` (Newton's method; ``l2`` penalises the weights, not the bias).

    ``weights`` weigh the examples (default 1 each), e.g. so that each dataset counts equally.
    ``penalty`` scales ``l2`` per feature (default 1 each): a wide block (a hidden state) can be
    held back hard while a few calibrated scalars beside it stay nearly free.
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    y = np.asarray(y, dtype=np.float64)
    sw = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    sw = sw * (len(sw) / sw.sum())
    if x.shape[0] != y.shape[0] or x.shape[1] != len(features):
        raise ConfigurationError(f"fit_logistic: x {x.shape}, y {y.shape}, {len(features)} feature names")
    if len(set(y.tolist())) < 2:
        raise ConfigurationError("fit_logistic needs both labels among the training examples")
    if not np.isfinite(x).all():
        raise ConfigurationError("fit_logistic: the features contain NaN or infinite values")
    mean = np.average(x, axis=0, weights=sw)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=sw))
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    scales = np.ones(x.shape[1]) if penalty is None else np.asarray(penalty, dtype=np.float64)
    if scales.shape != (x.shape[1],) or (scales < 0).any():
        raise ConfigurationError(f"fit_logistic: penalty needs {x.shape[1]} values >= 0")
    penalty_ = np.append(scales * l2 * len(x), 0.0)
    for _ in range(iterations):
        p = _sigmoid(z @ w)
        grad = z.T @ (sw * (p - y)) + penalty_ * w
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(penalty_ + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return LogisticHead(
        features=tuple(features),
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        coef=tuple(float(v) for v in w[:-1]),
        intercept=float(w[-1]),
    )


def auroc(scores: Sequence[float] | np.ndarray, labels: Sequence[int] | np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for label 1 (ties count one half); NaN with one class."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return math.nan
    _, inverse, counts = np.unique(np.concatenate([pos, neg]), return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # 1-based rank of each distinct value's last occurrence
    ranks = (last - (counts - 1) / 2.0)[inverse]  # ties share their average rank
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2.0) / (len(pos) * len(neg)))


@dataclass(frozen=True)
class OperatingPoint:
    """How a detector does at ``threshold`` on labelled out-of-fold scores."""

    threshold: float
    accuracy: float
    false_refusal_rate: float  # in-scope questions called out of scope
    oos_recall: float  # out-of-scope questions caught
    auroc: float
    n: int
    extra: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def operating_point(
    p: Sequence[float] | np.ndarray, y: Sequence[int] | np.ndarray, threshold: float
) -> OperatingPoint:
    ps = np.asarray(p, dtype=np.float64)
    ys = np.asarray(y)
    pred = ps >= threshold
    ins, oos = ys == 0, ys == 1
    return OperatingPoint(
        threshold=float(threshold),
        accuracy=float((pred == oos).mean()) if len(ys) else math.nan,
        false_refusal_rate=float(pred[ins].mean()) if ins.any() else math.nan,
        oos_recall=float(pred[oos].mean()) if oos.any() else math.nan,
        auroc=auroc(ps, ys),
        n=len(ys),
    )


def rescale_probability(p: float | Sequence[float] | np.ndarray, slope: float, shift: float) -> np.ndarray:
    """``sigmoid(slope * logit(p) + shift)``: a probability moved on the logit scale."""
    q = np.clip(np.asarray(p, dtype=np.float64), 1e-9, 1 - 1e-9)
    return np.asarray(_sigmoid(slope * np.log(q / (1 - q)) + shift))


def platt(
    p: Sequence[float] | np.ndarray, y: Sequence[int] | np.ndarray, weights: np.ndarray | None = None
) -> tuple[float, float]:
    """``(a, b)`` such that ``sigmoid(a * logit(p) + b)`` is calibrated on ``(p, y)`` (Platt
    scaling; ``weights`` as in the fit, e.g. each dataset and class the same). Fit it on scores
    the head did not see (out of fold) to correct a head that regularisation made timid."""
    q = np.clip(np.asarray(p, dtype=np.float64), 1e-9, 1 - 1e-9)
    z = np.log(q / (1 - q))
    fitted = fit_logistic(z[:, None], np.asarray(y), ("logit",), weights=weights, l2=1e-6)
    a = fitted.coef[0] / fitted.scale[0]
    return float(a), float(fitted.intercept - a * fitted.mean[0])


def rescaled(head: LogisticHead, a: float, b: float) -> LogisticHead:
    """``head`` whose logit is ``a * logit + b`` (the same ranking; a :func:`platt` correction
    folded into the weights)."""
    if not a > 0:
        raise ModelError(f"rescaled: the slope must be positive to keep the ranking, got {a}")
    return LogisticHead(
        features=head.features,
        mean=head.mean,
        scale=head.scale,
        coef=tuple(a * c for c in head.coef),
        intercept=a * head.intercept + b,
    )


def caught_at(
    p: Sequence[float] | np.ndarray, y: Sequence[int] | np.ndarray, max_false_refusals: float
) -> float:
    """The out-of-scope recall (``y == 1`` caught) at the lowest threshold on ``p`` that refuses at
    most ``max_false_refusals`` of the in-scope questions (``y == 0``), chosen in hindsight on these
    questions; ties at the cut stay answered. ``nan`` without both classes."""
    ps, ys = np.asarray(p, dtype=np.float64), np.asarray(y)
    ins = np.sort(ps[ys == 0])[::-1]
    oos = ps[ys == 1]
    if not len(ins) or not len(oos):
        return math.nan
    allowed = math.floor(max_false_refusals * len(ins) + 1e-9)  # in-scope questions it may refuse
    cut = ins[allowed] if allowed < len(ins) else -math.inf
    return float((oos > cut).mean())


def choose_threshold(
    p: Sequence[float] | np.ndarray, y: Sequence[int] | np.ndarray, weights: np.ndarray | None = None
) -> float:
    """The threshold on P(out of scope) with the best (weighted) accuracy (ties broken towards 0.5)."""
    ps = np.asarray(p, dtype=np.float64)
    ys = np.asarray(y)
    sw = np.ones(len(ys)) if weights is None else np.asarray(weights, dtype=np.float64)
    if not len(ps):
        raise ConfigurationError("choose_threshold needs at least one labelled score")
    values = np.unique(ps)
    cands = np.concatenate([[0.5], (values[1:] + values[:-1]) / 2.0 if len(values) > 1 else []])
    cands = cands[(cands > 0.0) & (cands < 1.0)]
    best, best_acc = 0.5, -1.0
    for t in cands:
        acc = float((sw * ((ps >= t) == (ys == 1))).sum() / sw.sum())
        if acc > best_acc + 1e-12 or (abs(acc - best_acc) <= 1e-12 and abs(t - 0.5) < abs(best - 0.5)):
            best, best_acc = float(t), acc
    return best


def grouped_folds(groups: Sequence[str], folds: int, *, seed: int = 0) -> list[np.ndarray]:
    """Test indices of ``folds`` folds; every group (document) lands in exactly one fold."""
    unique = sorted(set(groups))
    if folds < 2:
        raise ConfigurationError(f"folds must be at least 2, got {folds}")
    if len(unique) < folds:
        raise DatasetError(f"{len(unique)} documents cannot be split into {folds} document-grouped folds")
    order = np.random.default_rng(seed).permutation(len(unique))
    fold_of = {unique[j]: rank % folds for rank, j in enumerate(order)}
    g = np.array([fold_of[x] for x in groups])
    return [np.flatnonzero(g == k) for k in range(folds)]


def grouped_split(
    groups: Sequence[str], val_fraction: float, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(train, val)`` indices with about ``val_fraction`` of the groups (at least one) in val."""
    unique = sorted(set(groups))
    if not 0.0 < val_fraction < 1.0:
        raise ConfigurationError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if len(unique) < 2:
        raise DatasetError("need questions about at least 2 documents to hold some out for validation")
    n_val = min(len(unique) - 1, max(1, round(val_fraction * len(unique))))
    val_groups = {unique[j] for j in np.random.default_rng(seed).permutation(len(unique))[:n_val]}
    is_val = np.array([x in val_groups for x in groups])
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


def grouped_oof(
    n: int,
    groups: Sequence[str],
    fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    folds: int = 5,
    seed: int = 0,
) -> np.ndarray:
    """Out-of-fold predictions: ``fit_predict(train_idx, test_idx)`` per document-grouped fold."""
    if len(groups) != n:
        raise ConfigurationError(f"grouped_oof: {len(groups)} groups for {n} examples")
    out = np.full(n, np.nan)
    all_idx = np.arange(n)
    for test in grouped_folds(groups, folds, seed=seed):
        train = np.setdiff1d(all_idx, test)
        out[test] = fit_predict(train, test)
    return out


def dataset_oof(
    datasets: Sequence[str], fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """Leave-one-dataset-out predictions: each dataset's scores from ``fit_predict(train_idx,
    test_idx)`` fitted on all the other datasets (the closest a fit gets to data it has never seen).
    """
    names = np.asarray(datasets)
    unique = sorted(set(datasets))
    if len(unique) < 2:
        raise ConfigurationError(f"leave-one-dataset-out needs at least 2 datasets, got {unique}")
    out = np.full(len(names), np.nan)
    for name in unique:
        test = np.flatnonzero(names == name)
        train = np.flatnonzero(names != name)
        out[test] = fit_predict(train, test)
    return out


def head_file(path: str | Path, filename: str, *, create: bool = False) -> Path:
    """The head file for ``path``: ``path/filename`` when ``path`` is a folder (or has no suffix)."""
    p = Path(path)
    if p.is_dir() or (create and not p.suffix):
        if create:
            p.mkdir(parents=True, exist_ok=True)
        p = p / filename
    return p


def write_head_file(path: str | Path, filename: str, body: dict[str, Any]) -> Path:
    """Write a head's JSON to ``path`` (a file, or a folder that gets ``filename``); returns the file."""
    p = head_file(path, filename, create=True)
    p.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return p


def read_head_file(path: str | Path, filename: str, what: str) -> dict[str, Any]:
    """A head's JSON as a dict, or :class:`ModelError` naming ``what`` and the file."""
    p = head_file(path, filename)
    if not p.is_file():
        raise ModelError(f"{what} not found: {p}")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{p}: not a valid {what} ({type(exc).__name__}: {exc})") from None
    if not isinstance(raw, dict):
        raise ModelError(f"{p}: not a valid {what} (not a JSON object)")
    return raw


_Head = TypeVar("_Head")


def load_head_file(
    path: str | Path, filename: str, what: str, build: Callable[[dict[str, Any]], _Head]
) -> _Head:
    """``build`` applied to a head's JSON (:func:`read_head_file`). A :class:`ModelError` it raises
    comes back with the file's path in front; a missing or malformed field is a ModelError naming
    ``what`` and the file."""
    raw = read_head_file(path, filename, what)
    p = head_file(path, filename)
    try:
        return build(raw)
    except ModelError as exc:
        raise ModelError(f"{p}: {exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{p}: not a valid {what} ({type(exc).__name__}: {exc})") from None
