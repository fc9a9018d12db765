"""The system behind the guard: each question routed by the detector's verdict, with and without
the hedge zone.

A run with a detector holds, for every question, the detector's verdict and each prompt's response
with its judgement. The guarded view puts them together as :class:`~scopeguard.Guard` would (failing
closed), routing each question one of three ways:

* **refused**: the verdict is out of scope, or ``unknown`` (the guard fails closed): the guard's
  policy responds instead of the RAG system; counted as defused for an out-of-scope question and
  as a false refusal for an in-scope one;
* **hedged**: in scope, in the calibration profile's hedge band (``verdict.hedge``: a detector
  wrapped in a :class:`~scopeguard.detection.profile.CalibratedDetector`, for example
  ``calibrated(get_detector("default"), DIR)``): the response, followed by the caveat that the
  documents may not fully cover the question;
* **answered**: in scope: the response, as the judges judged it.

A hedged answer is neither a refusal nor a plain answer, so each rate comes two ways:

* ``defusion`` / ``false_refusal``: hedged answers are answers, judged by their response (the caveat
  alone does not defuse a question, nor refuse one): the guard without the hedge zone
  (``Guard(hedge=None)``);
* ``defusion_with_hedges`` / ``false_refusal_with_hedges``: a hedged answer counts as defused (an
  out-of-scope question: the user was warned) and as a false refusal (an in-scope one: a caveat on
  an answerable question, what the hedge zone costs). These are also the guard whose threshold
  is lowered to the hedge band's start.

The guard with the hedge zone lies between the two; :class:`Routes` says how many questions of each
class the difference rests on. With no hedged verdict the two coincide. A response that failed
(``error``), a question without a verdict (no detection, or one that failed) and an unknown
judgement of a response the rate depends on are left out and counted (``errors``, ``unknown``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from scopeguard.evaluation._rates import Metric, RateSummary, markdown_table, pct, rate_summary
from scopeguard.evaluation.store import DetectionRecord, ResponseRecord
from scopeguard.types import Verdict

__all__ = [
    "ROUTES",
    "GuardedRates",
    "Route",
    "Routes",
    "guarded_markdown",
    "guarded_rates",
    "guarded_summary",
    "route",
    "routes",
]

Route = Literal["refused", "hedged", "answered"]
ROUTES: tuple[Route, ...] = get_args(Route)


class Routes(BaseModel):
    """How the guard routed the questions of one gold class (``n``: the questions with a verdict)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int
    refused: int
    hedged: int
    answered: int
    shares: dict[str, float]
    """Route -> its share of ``n`` (empty when ``n`` is 0)."""


class GuardedRates(BaseModel):
    """One prompt behind the guard (see :mod:`scopeguard.evaluation._guarded`): each rate with
    hedged answers counted as answers, and counted as defused / refused (``_with_hedges``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    defusion: RateSummary
    defusion_with_hedges: RateSummary
    false_refusal: RateSummary
    false_refusal_with_hedges: RateSummary


def route(verdict: Verdict) -> Route:
    """Where a guard that fails closed sends a question with ``verdict``."""
    if verdict.label != "in_scope":
        return "refused"
    return "hedged" if verdict.hedge else "answered"


def routes(detections: Iterable[DetectionRecord]) -> dict[str, Routes]:
    """Gold label -> how the detector's verdicts route that class (failed detections left out)."""
    counts: dict[str, dict[Route, int]] = {
        label: dict.fromkeys(ROUTES, 0) for label in ("out_of_scope", "in_scope")
    }
    for d in detections:
        if d.verdict is not None:
            counts[d.label][route(d.verdict)] += 1
    out = {}
    for label, c in counts.items():
        n = sum(c.values())
        shares: dict[str, float] = {r: c[r] / n for r in ROUTES} if n else {}
        out[label] = Routes(n=n, shares=shares, **c)
    return out


def _guarded(metric: Metric, r: ResponseRecord, verdict: Verdict, with_hedges: bool) -> bool | None:
    way = route(verdict)
    if way == "refused" or (way == "hedged" and with_hedges):
        return True
    judgement = r.defusion if metric == "defusion" else r.refusal
    return None if judgement is None else judgement.value


def _summary(
    metric: Metric, records: list[ResponseRecord], verdicts: dict[str, Verdict], with_hedges: bool
) -> RateSummary:
    label = "out_of_scope" if metric == "defusion" else "in_scope"
    values: dict[str, list[bool]] = defaultdict(list)
    unknown = errors = 0
    for r in records:
        if r.label != label:
            continue
        verdict = verdicts.get(r.question_id)
        if r.error is not None or verdict is None:
            errors += 1
            continue
        value = _guarded(metric, r, verdict, with_hedges)
        if value is None:
            unknown += 1
        else:
            values[r.topic].append(value)
    return rate_summary(metric, values, unknown, errors)


def guarded_rates(records: list[ResponseRecord], verdicts: dict[str, Verdict]) -> GuardedRates:
    """The guarded rates of one prompt's ``records``; ``verdicts``: question id -> the detector's."""
    return GuardedRates(
        defusion=_summary("defusion", records, verdicts, False),
        defusion_with_hedges=_summary("defusion", records, verdicts, True),
        false_refusal=_summary("false_refusal", records, verdicts, False),
        false_refusal_with_hedges=_summary("false_refusal", records, verdicts, True),
    )


_CLASSES = (("out_of_scope", "out-of-scope"), ("in_scope", "in-scope"))


def guarded_summary(by_class: dict[str, Routes], prompts: list[tuple[str, GuardedRates | None]]) -> list[str]:
    """The summary's lines: the routes, then each prompt behind the guard."""
    shares = "; ".join(
        f"{name} questions "
        + ", ".join(f"{r} {pct(by_class[label].shares.get(r))}%" for r in ROUTES)
        + f" (n={by_class[label].n})"
        for label, name in _CLASSES
    )
    lines = [f"Behind the detector (failing closed): {shares}."]
    for prompt, g in prompts:
        if g is None:
            continue
        lines.append(
            f"- {prompt} behind the detector: defused {pct(g.defusion.rate)}% of out-of-scope questions "
            f"({pct(g.defusion_with_hedges.rate)}% counting hedged answers as defused, n={g.defusion.n}); "
            f"falsely refused {pct(g.false_refusal.rate)}% of in-scope questions "
            f"({pct(g.false_refusal_with_hedges.rate)}% counting hedged answers as refused, "
            f"n={g.false_refusal.n})."
        )
    return lines


def guarded_markdown(
    by_class: dict[str, Routes], prompts: list[tuple[str, GuardedRates | None]]
) -> list[str]:
    """The report's section on the guarded view (its lines)."""
    route_rows = [
        [
            name,
            str(by_class[label].n),
            *(f"{getattr(by_class[label], r)} ({pct(by_class[label].shares.get(r))})" for r in ROUTES),
        ]
        for label, name in _CLASSES
    ]
    rate_rows = [
        [
            prompt,
            pct(g.defusion.rate),
            pct(g.defusion_with_hedges.rate),
            pct(g.false_refusal.rate),
            pct(g.false_refusal_with_hedges.rate),
            f"{g.defusion.n} / {g.false_refusal.n}",
        ]
        for prompt, g in prompts
        if g is not None
    ]
    return [
        "## Behind the detector: refused, hedged, answered",
        "",
        "Each question routed by the detector's verdict, as the guard does (failing closed): refused "
        "(out of scope or no verdict: the policy responds), hedged (in scope, in the calibration "
        "profile's hedge band: the answer with a caveat), answered.",
        "",
        markdown_table(["questions", "n", *(f"{r} (%)" for r in ROUTES)], route_rows),
        "",
        "Rates (%): hedged answers counted as answers (judged by their response), and counted as "
        "defused / refused (*with hedges*). A refused question counts as defused, or as a false refusal.",
        "",
        markdown_table(
            [
                "prompt",
                "defusion",
                "defusion with hedges",
                "false refusal",
                "false refusal with hedges",
                "n out / in",
            ],
            rate_rows,
        ),
    ]
