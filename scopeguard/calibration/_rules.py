"""Threshold rules: each turns what a calibration read into an operating point, or says why not.

A calibration may have read three kinds of evidence: questions generated on the corpus (their
in-scope scores moved up by the generated shift) or labelled in a dataset folder, and the query
log's questions that people labelled. Each :class:`ThresholdRule` uses what it needs of an
:class:`Evidence`; :data:`RULES` lists them in the order one is applied (the first that gives a
point), and the report card shows every point side by side.

- :class:`LogLabels`: the log's labels, weighted as they were chosen (weighted split-conformal,
  :func:`~scopeguard.calibration._labels.weighted_point`);
- :class:`Combined`: the log's labels pooled with the generated questions, each kind half of
  the weight (for a log with few labels);
- :class:`Generated`: split-conformal on the generated (or dataset-labelled) questions alone: the
  safe profile, which catches less than people's questions allow.

A rule of one's own is an object with a ``name`` and a ``point(evidence)``; it may also have a
``note(evidence, reason)``: the line the report's notes carry when it could not set a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scopeguard.calibration._choose import OperatingPoint, operating_point
from scopeguard.calibration._labels import LabelledScore, weighted_point, weighted_rate
from scopeguard.errors import ConfigurationError

__all__ = ["RULES", "Combined", "Evidence", "Generated", "LogLabels", "ThresholdRule", "points"]


@dataclass(frozen=True)
class Evidence:
    """What a calibration read, for a ``budget`` (and a ``hedge_budget``, ``None``: no band):
    ``in_scope`` / ``out_of_scope`` scores of the generated or dataset-labelled questions (the
    generated in-scope ones already moved by the shift), and the log's ``labelled`` questions with
    the weight of the new answerable question a conformal rule counts at the top."""

    budget: float
    hedge_budget: float | None = None
    in_scope: Sequence[float] = ()
    out_of_scope: Sequence[float] = ()
    labelled: Sequence[LabelledScore] = ()
    test_weight: float = 0.5
    notes: list[str] = field(default_factory=list)


class ThresholdRule(Protocol):
    """A way to set the threshold: ``point`` raises :class:`ConfigurationError` (one line, why)
    when the evidence cannot set one (see the module docstring for the optional ``note``)."""

    name: str

    def point(self, evidence: Evidence) -> OperatingPoint: ...


def _weighted(labelled: Sequence[LabelledScore], evidence: Evidence) -> OperatingPoint:
    """The weighted point for the budget, with the hedge band below it where the labels allow."""
    point = weighted_point(labelled, evidence.budget, evidence.test_weight)
    if evidence.hedge_budget is None:
        return point
    try:
        hedge = weighted_point(labelled, evidence.hedge_budget, evidence.test_weight).threshold
    except ConfigurationError:
        return point
    hedge_from = min(hedge, point.threshold)
    answerable = [q for q in labelled if q.label == "in_scope"]
    hedged = weighted_rate([(hedge_from <= q.score < point.threshold, q.weight) for q in answerable])
    return OperatingPoint(
        threshold=point.threshold,
        hedge_from=hedge_from,
        false_refusals=point.false_refusals,
        caught=point.caught,
        hedged=hedged,
    )


class LogLabels:
    """The log's labelled questions alone."""

    name = "log labels"

    def point(self, evidence: Evidence) -> OperatingPoint:
        if not evidence.labelled:
            raise ConfigurationError("no logged question is labelled yet")
        return _weighted(evidence.labelled, evidence)

    def note(self, evidence: Evidence, reason: str) -> str | None:
        """Why the labels given so far set no point (nothing to say before any label)."""
        return f"no profile from the log's labels yet: {reason}" if evidence.labelled else None


class Combined:
    """The log's labels pooled with the generated questions, each kind half of the weight (no
    ``note``: what it lacks, the two rules above say)."""

    name = "combined"

    def point(self, evidence: Evidence) -> OperatingPoint:
        labelled = evidence.labelled
        if not labelled or not evidence.in_scope:
            raise ConfigurationError("needs both labelled logged questions and generated ones")
        answerable = sum(q.weight for q in labelled if q.label == "in_scope")
        refusable = sum(q.weight for q in labelled if q.label == "out_of_scope")
        pooled = [
            *labelled,
            *(LabelledScore(s, "in_scope", answerable / len(evidence.in_scope)) for s in evidence.in_scope),
        ]
        if refusable and evidence.out_of_scope:
            share = refusable / len(evidence.out_of_scope)
            pooled += [LabelledScore(s, "out_of_scope", share) for s in evidence.out_of_scope]
        return _weighted(pooled, evidence)


class Generated:
    """Split-conformal on the generated (or dataset-labelled) questions alone."""

    name = "generated"

    def point(self, evidence: Evidence) -> OperatingPoint:
        if not evidence.in_scope:
            raise ConfigurationError("no generated or labelled in-scope questions were read")
        return operating_point(
            evidence.in_scope, evidence.out_of_scope, evidence.budget, evidence.hedge_budget
        )

    def note(self, evidence: Evidence, reason: str) -> str | None:
        """Why the questions read set no point (nothing to say when none were read)."""
        return f"no profile from the generated questions: {reason}" if evidence.in_scope else None


#: the rules a calibration offers, in the order one is applied
RULES: tuple[ThresholdRule, ...] = (LogLabels(), Combined(), Generated())


def points(evidence: Evidence, rules: Sequence[ThresholdRule] = RULES) -> dict[str, OperatingPoint]:
    """Every point the rules can set on ``evidence``, in the rules' order (the first is the one to
    apply); a rule that could not set one adds its ``note``, if it has one to say, to the notes."""
    out: dict[str, OperatingPoint] = {}
    for rule in rules:
        try:
            out[rule.name] = rule.point(evidence)
        except ConfigurationError as exc:
            note = getattr(rule, "note", None)
            line = None if note is None else note(evidence, str(exc))
            if line:
                evidence.notes.append(line)
    return out
