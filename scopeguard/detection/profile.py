"""A corpus profile: the operating point of one detector, calibrated on the user's own corpus.

A detector's score is P(out of scope); where to cut it depends on the corpus (the same head
refuses 3% of answerable news questions and 68% of answerable product questions at one
threshold). ``scopeguard calibrate`` reads questions of the user's corpus (generated on it, or
labelled by people), chooses the threshold for a false-refusal **budget** (the share of
answerable questions the guard may refuse) and writes ``DIR/profile.json``:

- ``threshold``: a score at or above it is out of scope;
- ``hedge_from``: scores in ``[hedge_from, threshold)`` are in scope but answered with a caveat
  (:attr:`~scopeguard.types.Verdict.hedge`; the guard's hedge policy);
- the expected false refusals and out-of-scope questions caught, with 95% intervals, on the
  questions it was made from; the detector's identity (its name, its head's weights, its reading
  model and adapter), so that a profile is never applied to another detector.

:func:`budget_threshold` is the rule: the split-conformal quantile of the in-scope scores, so that
a new answerable question exchangeable with them is refused with probability at most the budget
(:func:`clopper_pearson` gives the intervals). :class:`CalibratedDetector` wraps any detector
that scores and relabels its verdicts by the profile; ``Guard(calibration=DIR)`` does that.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scopeguard.errors import ConfigurationError
from scopeguard.types import Document, Verdict

__all__ = [
    "PROFILE_FILE",
    "CalibratedDetector",
    "CalibrationProfile",
    "Rate",
    "budget_threshold",
    "calibrated",
    "clopper_pearson",
    "detector_identity",
    "load_profile",
    "rate",
    "scores_of",
]

PROFILE_FILE = "profile.json"
PROFILE_VERSION = 1


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, sum(math.exp(_log_binom_pmf(i, n, p)) for i in range(k + 1)))


def _bisect(f: Any, lo: float = 0.0, hi: float = 1.0) -> float:
    """The root of a function increasing from negative at ``lo`` to positive at ``hi``."""
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a proportion ``k / n``; ``(0, 1)`` with ``n == 0``."""
    if not 0 <= k <= n:
        raise ConfigurationError(f"clopper_pearson: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    # lower: P(X >= k | p) = alpha/2; upper: P(X <= k | p) = alpha/2
    low = 0.0 if k == 0 else _bisect(lambda p: (1.0 - _binom_cdf(k - 1, n, p)) - alpha / 2)
    high = 1.0 if k == n else _bisect(lambda p: alpha / 2 - _binom_cdf(k, n, p))
    return low, high


class Rate(BaseModel):
    """A proportion measured on ``n`` questions, with its exact 95% interval."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | None
    low: float
    high: float
    k: int
    n: int

    def __str__(self) -> str:
        if self.value is None:
            return "n/a (no questions)"
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.k} of {self.n})"


def rate(k: int, n: int, confidence: float = 0.95) -> Rate:
    low, high = clopper_pearson(k, n, confidence)
    return Rate(value=k / n if n else None, low=low, high=high, k=k, n=n)


def budget_threshold(in_scope_scores: Iterable[float], budget: float) -> float:
    """The threshold on P(out of scope) that refuses at most ``budget`` of answerable questions.

    Split-conformal: with the ``n`` in-scope scores sorted, the threshold sits just above the
    ``ceil((n + 1) * (1 - budget))``-th, so that a new answerable question exchangeable with them
    is refused (score >= threshold) with probability at most ``budget``. Fewer than
    ``ceil(1 / budget) - 1`` questions cannot promise that: a :class:`ConfigurationError` says how
    many are needed.
    """
    if not 0.0 < budget < 1.0:
        raise ConfigurationError(f"the false-refusal budget must be in (0, 1), got {budget}")
    scores = sorted(float(s) for s in in_scope_scores)
    if any(not 0.0 <= s <= 1.0 for s in scores):
        raise ConfigurationError("budget_threshold: scores must be probabilities in [0, 1]")
    n = len(scores)
    # rounded first: float error must not push an exact integer up a rank (150 * 0.82 = 123.00000000000001)
    rank = math.ceil(round((n + 1) * (1.0 - budget), 9))
    if rank > n:
        need = math.ceil(round((1.0 - budget) / budget, 9))
        raise ConfigurationError(
            f"a false-refusal budget of {budget:g} needs at least {need} in-scope questions to "
            f"calibrate on, got {n}: sample more documents or allow a larger budget"
        )
    return min(1.0, math.nextafter(scores[rank - 1], math.inf))


def detector_identity(detector: Any) -> dict[str, str]:
    """What a profile must match: the detector's name, plus what its ``identity()`` adds (its
    head's weights, its reading model and adapter)."""
    ident = getattr(detector, "identity", None)
    if callable(ident):
        return {str(k): str(v) for k, v in ident().items()}
    return {"detector": str(getattr(detector, "name", type(detector).__name__))}


class CalibrationProfile(BaseModel):
    """What ``scopeguard calibrate`` chose for one detector on one corpus (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = PROFILE_VERSION
    detector: str
    identity: dict[str, str]
    threshold: float = Field(gt=0.0, le=1.0)
    hedge_from: float | None = Field(default=None, gt=0.0, le=1.0)
    budget: float = Field(gt=0.0, lt=1.0)
    hedge_budget: float | None = Field(default=None, gt=0.0, lt=1.0)
    confidence: float = 0.95
    false_refusals: Rate
    caught: Rate
    hedged: Rate | None = None
    sources: tuple[str, ...] = ()
    data: dict[str, str] = Field(default_factory=dict)
    machine: str = ""
    created: str = ""
    scopeguard_version: str = ""
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _hedge_below_threshold(self) -> CalibrationProfile:
        if self.hedge_from is not None and self.hedge_from > self.threshold:
            raise ValueError(f"hedge_from ({self.hedge_from}) must not exceed threshold ({self.threshold})")
        return self

    def band(self, score: float) -> str:
        """``"defuse"``, ``"hedge"`` or ``"answer"`` for a score."""
        if score >= self.threshold:
            return "defuse"
        if self.hedge_from is not None and score >= self.hedge_from:
            return "hedge"
        return "answer"

    def check(self, detector: Any) -> None:
        """Raise :class:`ConfigurationError` unless the profile was made for ``detector``."""
        have = detector_identity(detector)
        diff = [
            f"{key}: profile {self.identity.get(key)!r}, detector {have.get(key)!r}"
            for key in sorted(set(self.identity) | set(have))
            if self.identity.get(key) != have.get(key)
        ]
        if diff:
            raise ConfigurationError(
                "this calibration profile was made for another detector ("
                + "; ".join(diff)
                + "): run scopeguard calibrate again with this detector"
            )

    def save(self, folder: str | os.PathLike[str]) -> Path:
        path = Path(folder) / PROFILE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path

    def summary(self) -> str:
        """One line: detector, threshold, budget and what it is expected to do."""
        hedge = f", hedge from {self.hedge_from:.3f}" if self.hedge_from is not None else ""
        return (
            f"{self.detector} at threshold {self.threshold:.3f}{hedge} (budget {self.budget:g}): "
            f"false refusals {self.false_refusals}, caught {self.caught}"
        )


def load_profile(location: str | os.PathLike[str] | CalibrationProfile) -> CalibrationProfile:
    """The profile in folder ``location`` (or the ``profile.json`` itself); a clear
    :class:`ConfigurationError` when it is missing or not a profile."""
    if isinstance(location, CalibrationProfile):
        return location
    path = Path(location)
    if path.is_dir():
        path = path / PROFILE_FILE
    if not path.is_file():
        raise ConfigurationError(
            f"no calibration profile at {location} (expected a folder with {PROFILE_FILE} from "
            "scopeguard calibrate)"
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{path}: not a readable calibration profile ({exc})") from None
    version = raw.get("version", PROFILE_VERSION) if isinstance(raw, dict) else PROFILE_VERSION
    if isinstance(version, int) and version > PROFILE_VERSION:  # a wrong type: the validation says so
        raise ConfigurationError(
            f"{path}: profile version {version} is newer than this scopeguard reads "
            f"({PROFILE_VERSION}): upgrade scopeguard"
        )
    try:
        return CalibrationProfile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "profile"
        raise ConfigurationError(f"{path}: not a calibration profile ({where}: {first['msg']})") from None


class CalibratedDetector:
    """Any scoring detector with a profile's thresholds: the label (and the hedge band) come from
    ``profile``, the score and everything else from ``detector``. Other attributes (``preread``,
    ``load``, ``reader``, ...) are the wrapped detector's."""

    def __init__(self, detector: Any, profile: CalibrationProfile | str | os.PathLike[str]) -> None:
        self.detector = detector
        self.profile = load_profile(profile)
        self.profile.check(detector)

    @property
    def name(self) -> str:
        return str(self.detector.name)

    def identity(self) -> dict[str, str]:
        return detector_identity(self.detector)

    def __getattr__(self, attr: str) -> Any:
        if attr in ("detector", "profile"):  # not set yet: no recursion through __getattr__
            raise AttributeError(attr)
        return getattr(self.detector, attr)

    def relabel(self, verdict: Verdict) -> Verdict:
        """``verdict`` labelled by the profile (an ``unknown`` or unscored verdict unchanged)."""
        if verdict.label == "unknown" or verdict.score is None:
            return verdict
        band = self.profile.band(verdict.score)
        label = "out_of_scope" if band == "defuse" else "in_scope"
        uncovered = verdict.uncovered if label == "out_of_scope" else ()
        return verdict.model_copy(update={"label": label, "hedge": band == "hedge", "uncovered": uncovered})

    def detect(self, question: str, documents: str | Document | Iterable[str | Document]) -> Verdict:
        return self.relabel(self.detector.detect(question, documents))

    async def adetect(self, question: str, documents: str | Document | Iterable[str | Document]) -> Verdict:
        return self.relabel(await self.detector.adetect(question, documents))


def calibrated(detector: Any, calibration: Any) -> Any:
    """``detector`` under ``calibration`` (a profile, its folder or file), or as it is with ``None``."""
    if calibration is None:
        return detector
    if isinstance(detector, CalibratedDetector):
        detector = detector.detector
    return CalibratedDetector(detector, calibration)


def scores_of(verdicts: Sequence[Verdict]) -> list[float]:
    """The scores of the verdicts that have one (failed reads dropped)."""
    return [float(v.score) for v in verdicts if v.score is not None and v.label != "unknown"]
