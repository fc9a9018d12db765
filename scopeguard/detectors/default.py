"""The shipped ``default`` detector: a learned cascade from the fast stage to a reading stage.

1. The fast stage (word coverage + MiniLM token alignment, milliseconds) scores every question.
   Where it is confident, outside a band ``(low, high)`` of its P(out of scope), its label stands.
   By default it may only accept a question on its own (``high`` is 1): a refusal always has the
   reader behind it, because word overlap misjudges questions asked in other words than the
   documents' (see :func:`fit_default_head`, ``fast_refuses``).
2. Inside the band the reading stage runs: the packaged Qwen2.5-Coder-1.5B answers "Does the
   document contain the answer?" and its Yes/No log-probabilities give a margin
   (:class:`~scopeguard.detectors.logprob.LogProbDetector`).
3. A small logistic head combines the fast features and the margin into P(out of scope); a
   threshold gives the label.

Everything in steps 1-3 is fitted on labelled data by :func:`fit_default_head` (document-grouped
cross-validation; ``scopeguard train-detector --detector default``): the fast stage's own
logistic head, the band (chosen on out-of-fold scores for the best accuracy, less
``escalation_cost`` per unit of escalation share), the combining head and the threshold. The
packaged head (``scopeguard/_assets/default_head.json``) was fitted on the shared SQuAD 2.0 and
ELOQ data only; its file records the data, the band, the escalation share and the operating point.

``Verdict.stage`` says which stage decided (``"fast"`` or ``"logprob"``); ``Verdict.uncovered``
lists question words the documents lack only when the final label is out of scope, so it never
contradicts the verdict a user sees. If the reading stage fails, the fast stage's verdict is
returned with the error recorded (``Verdict.error``), never worse than the fast stage alone.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.calibration import (
    LogisticHead,
    choose_threshold,
    fit_logistic,
    grouped_oof,
    head_file,
    operating_point,
    read_head_file,
    write_head_file,
)
from scopeguard.detectors.base import BaseDetector
from scopeguard.errors import ConfigurationError, ModelError, ScopeGuardError
from scopeguard.types import Document, Label, Verdict

__all__ = [
    "COMBINED_FEATURES",
    "FAST_FEATURES",
    "DefaultDetector",
    "DefaultHead",
    "default_head_path",
    "fit_default_head",
]

logger = logging.getLogger(__name__)

HEAD_FILE = "default_head.json"
FAST_FEATURES = ("coverage", "alignment")
COMBINED_FEATURES = ("coverage", "alignment", "margin")


def default_head_path() -> Path:
    """The head shipped in the package (``scopeguard/_assets/default_head.json``)."""
    return Path(str(resources.files("scopeguard") / "_assets" / HEAD_FILE))


@dataclass(frozen=True)
class DefaultHead:
    """The fitted cascade: fast head, band, combining head, thresholds and provenance."""

    fast: LogisticHead
    fast_threshold: float
    low: float
    high: float
    combined: LogisticHead
    threshold: float
    verdict_model: str
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.low <= self.high <= 1.0:
            raise ModelError(f"default head: need 0 <= low <= high <= 1, got {self.low}, {self.high}")

    def escalates(self, p_fast: float) -> bool:
        return self.low < p_fast < self.high

    def predict(self, coverage: np.ndarray, alignment: np.ndarray, margin: np.ndarray) -> np.ndarray:
        """The cascade's P(out of scope) for arrays of signals (margin used only where escalated)."""
        p_fast = self.fast.predict(np.stack([coverage, alignment], axis=1))
        p_comb = self.combined.predict(np.stack([coverage, alignment, np.nan_to_num(margin)], axis=1))
        esc = (p_fast > self.low) & (p_fast < self.high)
        return np.asarray(np.where(esc, p_comb, p_fast))

    def labels(self, coverage: np.ndarray, alignment: np.ndarray, margin: np.ndarray) -> np.ndarray:
        p_fast = self.fast.predict(np.stack([coverage, alignment], axis=1))
        p_comb = self.combined.predict(np.stack([coverage, alignment, np.nan_to_num(margin)], axis=1))
        esc = (p_fast > self.low) & (p_fast < self.high)
        return np.asarray(np.where(esc, p_comb >= self.threshold, p_fast >= self.fast_threshold))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "default_cascade",
            "fast": self.fast.to_dict(),
            "fast_threshold": self.fast_threshold,
            "band": [self.low, self.high],
            "combined": self.combined.to_dict(),
            "threshold": self.threshold,
            "verdict_model": self.verdict_model,
            "info": self.info,
        }

    def save(self, path: str | Path) -> Path:
        return write_head_file(path, HEAD_FILE, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> DefaultHead:
        raw = read_head_file(path, HEAD_FILE, "default cascade head")
        p = head_file(path, HEAD_FILE)
        try:
            low, high = (float(v) for v in raw["band"])
            return cls(
                fast=LogisticHead.from_dict(raw["fast"]),
                fast_threshold=float(raw["fast_threshold"]),
                low=low,
                high=high,
                combined=LogisticHead.from_dict(raw["combined"]),
                threshold=float(raw["threshold"]),
                verdict_model=str(raw["verdict_model"]),
                info=dict(raw.get("info", {})),
            )
        except ModelError as exc:
            raise ModelError(f"{p}: {exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{p}: not a valid default cascade head ({type(exc).__name__}: {exc})") from None


class DefaultDetector(BaseDetector):
    """The learned cascade (see the module docstring).

    Args:
        model: a head file or folder from ``train-detector --detector default`` (default: the
            packaged head).
        reader_llm: the reading stage's model (an LLM spec, a chat model or a verdict scorer;
            default: the model the head was fitted on, the packaged Qwen2.5-Coder-1.5B). It is
            part of the fitted head, so the guard's answering ``llm`` is not used here; a head
            fitted on another model's margins warns.
        reader_kwargs: options for :class:`~scopeguard.detectors.logprob.LogProbDetector`
            (``chunk_tokens``, ``max_chunks``).
        featurizer: the fast stage's featurizer (anything with ``analyse(question, documents) ->
            (values, uncovered)``); default: MiniLM's :class:`~scopeguard.detectors.fast.FastFeaturizer`.
        fast_kwargs: options for that featurizer (``cache_size``, ``word_threshold``, ``encoder``).
    """

    name = "default"
    stages = ("fast", "logprob")

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        reader_llm: Any = None,
        reader_kwargs: dict[str, Any] | None = None,
        featurizer: Any = None,
        **fast_kwargs: Any,
    ) -> None:
        from scopeguard.detectors.fast import FastFeaturizer
        from scopeguard.detectors.logprob import LogProbDetector

        self.head = DefaultHead.load(model if model is not None else default_head_path())
        allowed = {"cache_size", "word_threshold", "encoder", "max_chars", "cache_mb"}
        bad = sorted(set(fast_kwargs) - allowed)
        if bad:
            raise ConfigurationError(
                f"default detector does not take the option(s) {', '.join(bad)}; "
                f"valid: model, reader_llm, reader_kwargs, featurizer, {', '.join(sorted(allowed))}"
            )
        if reader_llm is None:  # the packaged reading model: fail now, with the pip line, if it cannot run
            from scopeguard._optional import require

            require(
                "llama_cpp",
                extra="local",
                feature="the default detector's reading stage",
                package="llama-cpp-python",
            )
        self.featurizer = featurizer if featurizer is not None else FastFeaturizer(**fast_kwargs)
        self._llm = reader_llm
        self._reader_kwargs = dict(reader_kwargs or {})
        self._reader: LogProbDetector | None = None

    @property
    def reader(self) -> Any:
        """The reading stage, built (and its model loaded) on first escalation."""
        if self._reader is None:
            from scopeguard.detectors.logprob import LogProbDetector

            llm = self._llm if self._llm is not None else f"local:{self.head.verdict_model}"
            self._reader = LogProbDetector(llm=llm, **self._reader_kwargs)
            if self._reader.scorer.name != self.head.verdict_model:
                logger.warning(
                    "default head was fitted on %s margins; reading with %s",
                    self.head.verdict_model,
                    self._reader.scorer.name,
                )
        return self._reader

    def load(self) -> None:
        """Load both stages' models now (the reading model otherwise loads on first escalation)."""
        self.reader.load()

    def preread(self, documents: Sequence[Document | str], *, progress: bool | None = None) -> int:
        """Have the reading stage read ``documents`` ahead of the questions and keep its state
        after each (on disk with llama.cpp), so that reading one for a question later costs only
        the question's tokens; see :meth:`LogProbDetector.preread`. Returns the passages read."""
        return int(self.reader.preread(documents, progress=progress))

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        values, uncovered = self.featurizer.analyse(question, documents)
        p_fast = self.head.fast.predict_one(values)
        facts = f"{values['coverage']:.0%} of the question's content words occur in the documents"
        if not self.head.escalates(p_fast):
            label: Label = "out_of_scope" if p_fast >= self.head.fast_threshold else "in_scope"
            return self._verdict(
                label, p_fast, "fast", f"{facts}; fast P(out of scope) {p_fast:.2f}", uncovered
            )
        try:
            best, n = self.reader.read(question, documents, stop_below=self._decisive_margin(values))
        except ScopeGuardError as exc:
            logger.warning("default: the reading stage failed (%s); the fast stage decides", exc)
            label = "out_of_scope" if p_fast >= self.head.fast_threshold else "in_scope"
            verdict = self._verdict(label, p_fast, "fast", f"{facts}; reading stage failed", uncovered)
            return verdict.model_copy(update={"error": f"{type(exc).__name__}: {exc}", "escalated": True})
        p = self.head.combined.predict_one({**values, "margin": best.margin})
        label = "out_of_scope" if p >= self.head.threshold else "in_scope"
        rationale = (
            f"{facts}; fast P(out of scope) {p_fast:.2f} is uncertain, so "
            f"{self.reader.scorer.name} read the documents: P(No to 'contains the answer?') "
            f"{best.p_no:.2f}; combined P(out of scope) {p:.2f}"
        )
        verdict = self._verdict(label, p, "logprob", rationale, uncovered)
        return verdict.model_copy(update={"escalated": True, "llm_calls": n})

    def _decisive_margin(self, values: dict[str, float]) -> float | None:
        """The margin at or below which the combined head says in scope for these fast features.

        The question is answered as soon as one document answers it, so once a passage's margin is
        this low no later passage can change the label: the reader may stop there.
        """
        head = self.head.combined
        i = head.features.index("margin")
        if head.coef[i] <= 0 or not 0.0 < self.head.threshold < 1.0:
            return None
        z_target = math.log(self.head.threshold / (1.0 - self.head.threshold))
        rest = head.intercept + sum(
            c * (values[f] - m) / sc
            for f, m, sc, c in zip(head.features, head.mean, head.scale, head.coef, strict=True)
            if f != "margin"
        )
        boundary = head.mean[i] + head.scale[i] * (z_target - rest) / head.coef[i]
        return float(boundary - 0.25)  # a little on the in-scope side of the boundary

    @staticmethod
    def _verdict(
        label: Label, score: float, stage: str, rationale: str, uncovered: tuple[str, ...]
    ) -> Verdict:
        shown = uncovered if label == "out_of_scope" else ()
        if shown:
            rationale += "; not in the documents: " + ", ".join(repr(u) for u in shown)
        return Verdict(label=label, score=score, rationale=rationale, uncovered=shown, stage=stage)


# -- fitting ----------------------------------------------------------------------------------
def _weighted_accuracy(pred: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    return float((w * (pred == (y == 1))).sum() / w.sum())


_NOT_IN_HEAD = ("band_curve", "out_of_fold")  # report entries too large (or not JSON) for the head file


def fit_default_head(
    coverage: np.ndarray,
    alignment: np.ndarray,
    margin: np.ndarray,
    labels: np.ndarray,
    groups: Sequence[str],
    *,
    weights: np.ndarray | None = None,
    verdict_model: str,
    escalation_cost: float = 0.01,
    fast_refuses: bool = False,
    folds: int = 5,
    seed: int = 0,
    info: dict[str, Any] | None = None,
) -> tuple[DefaultHead, dict[str, Any]]:
    """Fit the cascade on labelled signals; returns the head and its cross-validated report.

    ``fast_refuses``: whether the fast stage may label a question out of scope on its own. Off by
    default, so the band's upper edge is 1 and every refusal has the reader's margin behind it:
    word overlap is confident about questions whose words the documents lack, and that is what a
    question reworded in the user's own words looks like (on a held-out set of support questions
    the fast stage scored reworded in-scope questions as more out of scope than the real ones), a
    shift the training data cannot show. Turn it on where the questions are known to use the
    documents' words and latency matters more (on ELOQ dev the fast stage then decides about a
    fifth of the questions alone, at the same cross-validated accuracy).

    ``weights`` (default equal) weigh examples in the band and threshold choice, e.g. so that
    each dataset counts equally. The band maximises out-of-fold weighted accuracy minus
    ``escalation_cost`` x the escalated share. The report holds the out-of-fold operating point,
    the escalation share, the band curve, and under ``"out_of_fold"`` the per-example arrays
    ``p`` (cascade P(out of scope)), ``pred`` (predicted out of scope) and ``escalated``.
    """
    y = np.asarray(labels, dtype=int)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    xf = np.stack([coverage, alignment], axis=1)
    xc = np.stack([coverage, alignment, margin], axis=1)
    if np.isnan(xc).any():
        raise ConfigurationError("fit_default_head: every example needs coverage, alignment and a margin")

    def oof(x: np.ndarray, names: Sequence[str]) -> np.ndarray:
        def fp(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
            return fit_logistic(x[tr], y[tr], names, weights=w[tr]).predict(x[te])

        return grouped_oof(len(y), groups, fp, folds=folds, seed=seed)

    p_fast = oof(xf, FAST_FEATURES)
    p_comb = oof(xc, COMBINED_FEATURES)
    t_fast = choose_threshold(p_fast, y, w)
    t_comb = choose_threshold(p_comb, y, w)
    pred_fast = p_fast >= t_fast
    pred_comb = p_comb >= t_comb

    grid = np.unique(np.concatenate([[0.0, 1.0], np.quantile(p_fast, np.linspace(0, 1, 41))]))
    curve: list[dict[str, float]] = []
    best: tuple[float, float, float, float] | None = None  # (objective, low, high, share)
    for i, low in enumerate(grid):
        for high in grid[i:]:
            esc = (p_fast > low) & (p_fast < high)
            pred = np.where(esc, pred_comb, pred_fast)
            acc = _weighted_accuracy(pred, y, w)
            share = float((w * esc).sum() / w.sum())
            objective = acc - escalation_cost * share
            allowed = fast_refuses or high >= 1.0
            if allowed and (best is None or objective > best[0] + 1e-12):
                best = (objective, float(low), float(high), share)
            if high == grid[-1] or low == grid[0]:
                curve.append({"low": float(low), "high": float(high), "accuracy": acc, "escalated": share})
    assert best is not None
    _, low, high, share = best

    esc = (p_fast > low) & (p_fast < high)
    p_cascade = np.where(esc, p_comb, p_fast)
    pred = np.where(esc, pred_comb, pred_fast)
    point = operating_point(p_cascade, y, 0.5).to_dict()
    point.update(
        threshold=None,
        accuracy=float((pred == (y == 1)).mean()),
        false_refusal_rate=float(pred[y == 0].mean()) if (y == 0).any() else float("nan"),
        oos_recall=float(pred[y == 1].mean()) if (y == 1).any() else float("nan"),
    )
    report = {
        "folds": folds,
        "n": len(y),
        "band": [low, high],
        "escalated": float(esc.mean()),
        "escalated_weighted": share,
        "fast_threshold": t_fast,
        "threshold": t_comb,
        "cascade": point,
        "fast_alone": operating_point(p_fast, y, t_fast).to_dict(),
        "reader_alone": operating_point(
            _fit_logistic_oof_margin(margin, y, groups, folds=folds, seed=seed), y, 0.5
        ).to_dict(),
        "combined_alone": operating_point(p_comb, y, t_comb).to_dict(),
        "escalation_cost": escalation_cost,
        "fast_refuses": fast_refuses,
        "band_curve": curve,
        "out_of_fold": {"p": p_cascade, "pred": pred, "escalated": esc},
    }
    head = DefaultHead(
        fast=fit_logistic(xf, y, FAST_FEATURES, weights=w),
        fast_threshold=t_fast,
        low=low,
        high=high,
        combined=fit_logistic(xc, y, COMBINED_FEATURES, weights=w),
        threshold=t_comb,
        verdict_model=verdict_model,
        info={
            **(info or {}),
            "cv": {k: v for k, v in report.items() if k not in ("band_curve", "out_of_fold")},
        },
    )
    return head, report


def _fit_logistic_oof_margin(
    margin: np.ndarray, y: np.ndarray, groups: Sequence[str], *, folds: int = 5, seed: int = 0
) -> np.ndarray:
    """Out-of-fold Platt-scaled P(out of scope) from the margin alone."""
    x = np.asarray(margin, dtype=np.float64)[:, None]

    def fp(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return fit_logistic(x[tr], y[tr], ("margin",)).predict(x[te])

    return grouped_oof(len(y), groups, fp, folds=folds, seed=seed)
