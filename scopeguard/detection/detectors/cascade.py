"""A two-stage cascade: a cheap first stage decides confident cases, uncertain ones escalate.

``CascadeDetector(first, second, low=..., high=...)`` runs ``first``; when its score P(out of
scope) is below ``low`` or above ``high`` (or equal to them) its verdict stands. A score strictly
inside ``(low, high)``, or a first-stage verdict without a score, escalates to ``second``: the
returned verdict is the second stage's, with ``escalated=True``, the first stage's ``uncovered``
spans kept when the second has none, and both rationales. If the second stage raises a
:class:`~scopeguard.errors.ScopeGuardError` or answers ``unknown``, the first stage's verdict is
returned (still ``escalated=True``, with the error in ``Verdict.error``): a cascade never ends
worse off than its first stage.

``default_cascade()`` builds the shipped default (see its docstring for the measured choice).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopeguard.detection.detectors.base import BaseDetector, Detector
from scopeguard.errors import ConfigurationError, ScopeGuardError
from scopeguard.types import Document, Verdict

__all__ = ["DEFAULT_HIGH", "DEFAULT_LOW", "CascadeDetector", "default_cascade"]

logger = logging.getLogger(__name__)

DEFAULT_LOW = 0.25
DEFAULT_HIGH = 0.75


def _resolve(stage: str | Detector, kwargs: dict[str, Any] | None = None) -> Detector:
    from scopeguard.detection.detectors.registry import get_detector

    if isinstance(stage, str):
        return get_detector(stage, **(kwargs or {}))
    if not isinstance(stage, Detector):
        raise ConfigurationError(f"cascade stage must be a detector or a registered name, got {stage!r}")
    return stage


class CascadeDetector(BaseDetector):
    """Decide with ``first`` outside ``(low, high)``; escalate the uncertain band to ``second``."""

    def __init__(
        self,
        first: str | Detector = "fast",
        second: str | Detector = "judge",
        *,
        low: float = DEFAULT_LOW,
        high: float = DEFAULT_HIGH,
        name: str | None = None,
    ) -> None:
        if not 0.0 <= low <= high <= 1.0:
            raise ConfigurationError(f"need 0 <= low <= high <= 1, got low={low}, high={high}")
        self.first = _resolve(first)
        self.second = _resolve(second)
        self.low = low
        self.high = high
        self.name = name or f"cascade({self.first.name}->{self.second.name})"

    def needs_escalation(self, verdict: Verdict) -> bool:
        """True when the first stage's verdict falls in the uncertain band (or has no score)."""
        return verdict.score is None or verdict.label == "unknown" or self.low < verdict.score < self.high

    def _merge(self, first: Verdict, second: Verdict | None, error: str | None) -> Verdict:
        if second is None or second.label == "unknown":
            why = error or (second.error if second is not None else None) or "second stage answered unknown"
            logger.warning("cascade: second stage %s gave no verdict (%s)", self.second.name, why)
            return first.model_copy(
                update={
                    "escalated": True,
                    "error": why,
                    "detector": self.name,
                    "llm_calls": first.llm_calls + (second.llm_calls if second else 0),
                }
            )
        return second.model_copy(
            update={
                "escalated": True,
                "uncovered": second.uncovered or first.uncovered,
                "rationale": f"[{self.first.name}, uncertain] {first.rationale}\n"
                f"[{self.second.name}] {second.rationale}",
                "detector": self.name,
                "llm_calls": first.llm_calls + second.llm_calls,
            }
        )

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        first = self.first.detect(question, documents)
        if not self.needs_escalation(first):
            return first.model_copy(update={"detector": self.name})
        try:
            second: Verdict | None = self.second.detect(question, documents)
            error = None
        except ScopeGuardError as exc:
            second, error = None, f"{type(exc).__name__}: {exc}"
        return self._merge(first, second, error)

    async def _adetect(self, question: str, documents: Sequence[Document]) -> Verdict:
        first = await self.first.adetect(question, documents)
        if not self.needs_escalation(first):
            return first.model_copy(update={"detector": self.name})
        try:
            second: Verdict | None = await self.second.adetect(question, documents)
            error = None
        except ScopeGuardError as exc:
            second, error = None, f"{type(exc).__name__}: {exc}"
        return self._merge(first, second, error)


def default_cascade(
    *,
    model: str | Path | None = None,
    second: str | Detector | None = None,
    low: float = DEFAULT_LOW,
    high: float = DEFAULT_HIGH,
    **first_kwargs: Any,
) -> Detector:
    """The shipped default detector: the fast stage, optionally cascading to ``second``.

    ``model`` (the fast head) and ``first_kwargs`` go to :class:`FastDetector`. With ``second``
    (a detector or a registered name, e.g. ``"probe"`` or ``"judge"``) the result is a
    :class:`CascadeDetector` escalating fast scores inside ``(low, high)``.

    Without ``second`` the default is the fast stage alone. Measured on the ELOQ gold dev split
    (5-fold document-grouped CV, out-of-fold scores): the best offline second stage we could
    build in time, the same features on all-mpnet-base-v2 token embeddings (alone 0.868-0.889),
    was *worse* than the fast stage on its own uncertain band (band 0.25-0.75, about 20% of
    questions: fast 0.67-0.71 correct there, mpnet 0.58-0.61), so the cascade lowered accuracy
    (0.868-0.889 vs 0.896-0.903); the 0.5B judge is weaker still. See benchmarks/detectors.py.
    """
    from scopeguard.detection.detectors.fast import FastDetector

    first = FastDetector(model=model, **first_kwargs)
    if second is None:
        return first
    return CascadeDetector(first, second, low=low, high=high, name="default")
