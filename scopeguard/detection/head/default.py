"""The ``default`` detector's head: which reading signals, and a logistic regression over them.

A :class:`DefaultHead` names the reading model and prompt, the signals it reads
(:data:`~scopeguard.detection.signals.READ_FEATURES`: the verdict margin, the inference probe's
margin, the hidden state of one layer at the verdict position), the fitted
:class:`~scopeguard.detection.head.calibration.LogisticHead` and its threshold.
:func:`fit_default_head` fits one on :class:`~scopeguard.detection.signals.Signals` with
document-grouped CV and leave-one-dataset-out, each dataset and class weighing the same;
:func:`model_card` writes the card saved beside it (``scopeguard/_assets/default_head.md``).

A head may also carry a :class:`ShortPassages` shift: a document of fewer than ``words`` words gives
the reader little to go on, and the head's P(out of scope) of its passage is lowered by ``shift``
on the logit scale before the threshold (chosen by ``benchmarks/studies/short_passages.py
--ship``). Like the threshold it is part of the operating point, not of what the head computes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.detection.head.calibration import (
    LogisticHead,
    caught_at,
    choose_threshold,
    dataset_oof,
    fit_logistic,
    grouped_oof,
    load_head_file,
    operating_point,
    platt,
    rescale_probability,
    rescaled,
    write_head_file,
)
from scopeguard.detection.head.card import model_card
from scopeguard.detection.signals import INFERENCE_TEMPLATE, READ_FEATURES, signal_matrix
from scopeguard.errors import ConfigurationError, ModelError

__all__ = [
    "HEAD_FILE",
    "SCALAR_PENALTY",
    "SET_HEAD_FILE",
    "DefaultHead",
    "ShortPassages",
    "balanced_weights",
    "default_head_path",
    "fit_default_head",
    "model_card",
    "penalties",
]

HEAD_FILE = "default_head.json"
#: the head for set reads (``DefaultDetector(read="set")``): fitted on questions read against their
#: top 3 retrieved chunks as one set (``benchmarks/set_reads.py --ship``)
SET_HEAD_FILE = "default_set_head.json"
#: the L2 penalty on the scalar signals relative to the hidden state's (held back by ``l2``)
SCALAR_PENALTY = 0.01


def default_head_path(read: str = "passages") -> Path:
    """The head shipped in the package for ``read`` (``"passages"``:
    ``scopeguard/_assets/default_head.json``; ``"set"``: ``default_set_head.json``)."""
    name = SET_HEAD_FILE if read == "set" else HEAD_FILE
    return Path(str(resources.files("scopeguard") / "_assets" / name))


@dataclass(frozen=True)
class ShortPassages:
    """A document of fewer than ``words`` words: its passage's P(out of scope) is lowered by
    ``shift`` on the logit scale (``logit(p) - shift``)."""

    words: int
    shift: float

    def __post_init__(self) -> None:
        if self.words < 1 or not (math.isfinite(self.shift) and self.shift >= 0.0):
            raise ModelError(f"default head: short passages need words >= 1 and shift >= 0, got {self}")

    def applies(self, text: str) -> bool:
        return len(text.split()) < self.words

    def lowered(self, p: float) -> float:
        """``p`` with the shift applied."""
        p = min(max(p, 1e-12), 1.0 - 1e-12)
        return 1.0 / (1.0 + math.exp(-(math.log(p / (1.0 - p)) - self.shift)))


@dataclass(frozen=True)
class DefaultHead:
    """Which signals to read, and the fitted logistic head over them (with its threshold)."""

    verdict_model: str
    signals: tuple[str, ...]  # a subset of READ_FEATURES, in the head's column order
    head: LogisticHead
    threshold: float
    layer: int | None = None  # the hidden state's layer (transformers numbering), if "hidden"
    template: str = "answerability_verdict"
    info: dict[str, Any] = field(default_factory=dict)
    short_passages: ShortPassages | None = None

    def __post_init__(self) -> None:
        bad = [s for s in self.signals if s not in READ_FEATURES]
        if bad or not self.signals:
            raise ModelError(f"default head: signals must be among {READ_FEATURES}, got {self.signals}")
        if ("hidden" in self.signals) != (self.layer is not None):
            raise ModelError("default head: a layer is needed exactly when the head reads a hidden state")
        if not 0.0 < self.threshold < 1.0:
            raise ModelError(f"default head: threshold must be in (0, 1), got {self.threshold}")

    @property
    def probes(self) -> tuple[str, ...]:
        """The verdict templates read after the main one."""
        return (INFERENCE_TEMPLATE,) if "inference_margin" in self.signals else ()

    @property
    def layers(self) -> tuple[int, ...]:
        return () if self.layer is None else (self.layer,)

    def row(self, margin: float, inference_margin: float | None, hidden: np.ndarray | None) -> np.ndarray:
        """One question's feature row in the head's column order."""
        parts: list[np.ndarray] = []
        for name in self.signals:
            if name == "margin":
                parts.append(np.array([margin]))
            elif name == "inference_margin":
                if inference_margin is None:
                    raise ModelError("default head: the inference probe was not read")
                parts.append(np.array([inference_margin]))
            else:
                if hidden is None:
                    raise ConfigurationError(
                        f"this default head reads the hidden state of layer {self.layer}, and the "
                        "reading model returned none: read with a llama.cpp model (local:...), or "
                        "use detector='logprob', or fit a head without it "
                        "(train-detector --detector default --signals margin,inference_margin)"
                    )
                parts.append(np.asarray(hidden, dtype=np.float64).ravel())
        return np.concatenate(parts)

    def scorer(self, spec: str | None = None) -> Any:
        """A :class:`~scopeguard.detection.read.VerdictScorer` for ``spec`` (default: the packaged model
        this head was fitted on) that reads the hidden states the head needs."""
        from scopeguard.detection.read.scorer import verdict_scorer

        extra = {"layers": self.layers} if self.layers else {}
        return verdict_scorer(spec or f"local:{self.verdict_model}", **extra)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "default_read",
            "verdict_model": self.verdict_model,
            "template": self.template,
            "signals": list(self.signals),
            "layer": self.layer,
            "head": self.head.to_dict(),
            "threshold": self.threshold,
            "info": self.info,
            **({"short_passages": dataclasses.asdict(self.short_passages)} if self.short_passages else {}),
        }

    def weights_sha256(self) -> str:
        """12 hex digits of the sha256 of what the head computes (model, prompt, signals, layer,
        weights), not of its threshold or card: a calibration profile names the head by it."""
        body = {k: v for k, v in self.to_dict().items() if k not in ("threshold", "info", "short_passages")}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]

    def save(self, path: str | Path) -> Path:
        """Write the head (JSON) and its card (``<name>.md`` beside it); returns the JSON file."""
        out = write_head_file(path, HEAD_FILE, self.to_dict())
        out.with_suffix(".md").write_text(model_card(self), encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | Path) -> DefaultHead:
        return load_head_file(path, HEAD_FILE, "default head", cls._from_dict)

    @classmethod
    def _from_dict(cls, raw: dict[str, Any]) -> DefaultHead:
        if raw.get("kind") != "default_read":
            raise ModelError(
                f"a {raw.get('kind', 'unknown')!r} head, not the reading head this version's "
                "default detector uses; refit it with `scopeguard train-detector --detector default`"
            )
        layer = raw.get("layer")
        short = raw.get("short_passages")
        short_passages = None if short is None else ShortPassages(int(short["words"]), float(short["shift"]))
        return cls(
            verdict_model=str(raw["verdict_model"]),
            signals=tuple(str(s) for s in raw["signals"]),
            head=LogisticHead.from_dict(raw["head"]),
            threshold=float(raw["threshold"]),
            layer=None if layer is None else int(layer),
            template=str(raw.get("template", "answerability_verdict")),
            info=dict(raw.get("info", {})),
            short_passages=short_passages,
        )


def balanced_weights(datasets: Sequence[str], labels: np.ndarray) -> np.ndarray:
    """Weights under which each dataset, and each class within it, counts the same."""
    names = np.asarray(datasets)
    y = np.asarray(labels)
    w = np.zeros(len(y))
    for name in set(names.tolist()):
        for label in (0, 1):
            m = (names == name) & (y == label)
            if m.any():
                w[m] = 1.0 / m.sum()
    return w * (len(w) / w.sum())


def penalties(columns: Sequence[str]) -> list[float]:
    """Per-column L2 scales: 1 for a hidden state's dimensions, :data:`SCALAR_PENALTY` for the rest
    (a joint L2 would shrink the margin as hard as any one of 1,536 hidden dimensions)."""
    return [1.0 if c.startswith("h") and "_" in c else SCALAR_PENALTY for c in columns]


def fit_default_head(
    signals: Any,
    *,
    verdict_model: str,
    names: Sequence[str] = ("margin", "hidden"),
    layer: int | None = None,
    l2: float = 300.0,
    dataset_of: dict[str, str] | None = None,
    max_false_refusal: float | None = None,
    threshold_on: str = "cv",
    platt_lodo: bool = False,
    folds: int = 5,
    seed: int = 0,
    info: dict[str, Any] | None = None,
) -> tuple[DefaultHead, dict[str, Any]]:
    """Fit the reading head on :class:`~scopeguard.detection.signals.Signals`; returns it and its report.

    Each dataset, and each class within it, weighs the same; ``l2`` holds the hidden state back
    (the scalar signals get :data:`SCALAR_PENALTY` of it). The report has document-grouped
    cross-validation over all the data (``cv``, overall and per dataset) and, with two datasets
    or more, leave-one-dataset-out (``lodo``: each dataset scored by a head fitted on the
    others), both at the threshold chosen on the out-of-fold scores: the most accurate one whose
    false-refusal rate (in-scope questions called out of scope) stays at most ``max_false_refusal``
    on every dataset (``None``: the most accurate). ``threshold_on="lodo"`` chooses it on the
    leave-one-dataset-out scores instead (each dataset scored by a head that never saw it: what a
    new corpus gets), so that the bound holds on every left-out dataset; the shipped head is
    chosen so. ``platt_lodo``: Platt-scale the head on its leave-one-dataset-out scores (each
    dataset and class weighing the same), so that its P(out of scope) means what it says on a
    corpus it never saw (an L2-held head is timid: its scores crowd around 0.5); every reported
    score is rescaled the same way. ``dataset_of`` maps signal dataset names to the groups left
    out together (e.g. both SQuAD files as ``squad2``).
    """
    if threshold_on not in ("cv", "lodo"):
        raise ConfigurationError(f"threshold_on must be 'cv' or 'lodo', got {threshold_on!r}")
    names = tuple(names)
    layer = layer if "hidden" in names else None
    x, columns = signal_matrix(signals, names, layer)
    if not np.isfinite(x).all():
        raise ConfigurationError("fit_default_head: some questions lack a signal (NaN): read them all first")
    y = np.asarray(signals.labels, dtype=int)
    if len(set(y.tolist())) < 2:
        raise ConfigurationError("the datasets need both in-scope and out-of-scope questions")
    datasets = [(dataset_of or {}).get(d, d) for d in signals.datasets]
    w = balanced_weights(datasets, y)

    scales = penalties(columns)

    def fp(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return fit_logistic(x[tr], y[tr], columns, weights=w[tr], l2=l2, penalty=scales).predict(x[te])

    p_cv = grouped_oof(len(y), signals.groups, fp, folds=folds, seed=seed)
    several = len(set(datasets)) > 1
    if threshold_on == "lodo" and not several:
        raise ConfigurationError("a threshold chosen leave-one-dataset-out needs two datasets or more")
    p_lodo = dataset_oof(datasets, fp) if several else None
    slope, shift = 1.0, 0.0
    if platt_lodo:
        if p_lodo is None:
            raise ConfigurationError("calibrating the head leave-one-dataset-out needs two datasets or more")
        slope, shift = platt(p_lodo, y, w)
        p_cv, p_lodo = rescale_probability(p_cv, slope, shift), rescale_probability(p_lodo, slope, shift)
    chosen_on = p_lodo if threshold_on == "lodo" and p_lodo is not None else p_cv
    threshold = _threshold(chosen_on, y, w, datasets, max_false_refusal)
    report: dict[str, Any] = {
        "signals": list(names),
        "layer": layer,
        "l2": l2,
        "threshold": threshold,
        "threshold_on": threshold_on,
        "platt": [slope, shift] if platt_lodo else None,
        "max_false_refusal": max_false_refusal,
        "cv": _points(p_cv, y, datasets, threshold),
    }
    if p_lodo is not None:
        report["lodo"] = _points(p_lodo, y, datasets, threshold)["per_dataset"]
    final = fit_logistic(x, y, columns, weights=w, l2=l2, penalty=scales)
    if platt_lodo:
        final = rescaled(final, slope, shift)
    head = DefaultHead(
        verdict_model=verdict_model,
        signals=names,
        head=final,
        threshold=threshold,
        layer=layer,
        info={**(info or {}), **report},
    )
    oof: dict[str, Any] = {"p": p_cv, "pred": p_cv >= threshold}
    if p_lodo is not None:
        oof["p_lodo"] = p_lodo
    return head, {**report, "out_of_fold": oof}


def _threshold(
    p: np.ndarray, y: np.ndarray, w: np.ndarray, datasets: Sequence[str], max_false_refusal: float | None
) -> float:
    """The out-of-fold threshold (see :func:`fit_default_head`), kept within [0.05, 0.95]."""
    best = choose_threshold(p, y, w)
    if max_false_refusal is not None:
        names = np.asarray(datasets)

        def worst_fr(t: float) -> float:
            return max(
                float((p[(names == n) & (y == 0)] >= t).mean())
                for n in set(datasets)
                if ((names == n) & (y == 0)).any()
            )

        if worst_fr(best) > max_false_refusal:
            candidates = [t for t in np.unique(p) if worst_fr(float(t)) <= max_false_refusal]
            if candidates:
                accuracy = [float((w * ((p >= t) == (y == 1))).sum() / w.sum()) for t in candidates]
                best = float(candidates[int(np.argmax(accuracy))])
            else:
                best = float(p.max())
    return float(min(0.95, max(0.05, best)))


def _points(p: np.ndarray, y: np.ndarray, datasets: Sequence[str], threshold: float) -> dict[str, Any]:
    names = np.asarray(datasets)
    per = {}
    for name in sorted(set(datasets)):
        m = names == name
        point = operating_point(p[m], y[m], threshold)
        point.extra["caught_at_10"] = caught_at(p[m], y[m], 0.10)
        per[name] = point.to_dict()
    return {"overall": operating_point(p, y, threshold).to_dict(), "per_dataset": per}
