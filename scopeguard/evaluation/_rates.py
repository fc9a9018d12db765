"""One rate of one prompt, overall and per topic, and how rates are written: shared by the report
and its guarded view."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

__all__ = ["Metric", "RateSummary", "markdown_table", "pct", "rate_summary"]

Metric = Literal["defusion", "false_refusal"]


class RateSummary(BaseModel):
    """One rate of one prompt, overall and per topic (rates in [0, 1]; ``None``: no data)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metric: Metric
    rate: float | None
    n: int
    positives: int
    unknown: int
    errors: int
    by_topic: dict[str, float]
    n_by_topic: dict[str, int]
    topic_mean: float | None
    topic_std: float | None
    min_topic: str | None
    max_topic: str | None


def rate_summary(metric: Metric, values: dict[str, list[bool]], unknown: int, errors: int) -> RateSummary:
    """The summary of ``values`` (topic -> outcomes; unknown and errored ones counted apart)."""
    by_topic = {t: float(np.mean(v)) for t, v in sorted(values.items()) if v}
    n = sum(len(v) for v in values.values())
    positives = sum(sum(v) for v in values.values())
    rates = list(by_topic.values())
    return RateSummary(
        metric=metric,
        rate=positives / n if n else None,
        n=n,
        positives=positives,
        unknown=unknown,
        errors=errors,
        by_topic=by_topic,
        n_by_topic={t: len(v) for t, v in sorted(values.items()) if v},
        topic_mean=float(np.mean(rates)) if rates else None,
        topic_std=float(np.std(rates)) if rates else None,
        min_topic=min(by_topic, key=lambda t: by_topic[t]) if by_topic else None,
        max_topic=max(by_topic, key=lambda t: by_topic[t]) if by_topic else None,
    )


def pct(x: float | None) -> str:
    """A rate as a percentage with two decimals (``n/a`` for none)."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.2f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
