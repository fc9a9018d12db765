"""Which logged questions a person labels, and the threshold their labels give.

A threshold for a false-refusal budget ``B`` sits where the answerable questions scored above it
are a share ``B`` of all answerable ones: a tail of the answerable questions' scores. Labels drawn
at random from a log spend most of themselves far from that tail. :func:`choose_to_label` draws
them in two strata of the log's scores instead:

- **upper**: the questions scoring at or above where the threshold could sit. The detector's own
  scores give a first guess (each question counts ``1 - score`` as answerable: the threshold for a
  budget ``4 B`` under that guess), wide enough that a detector several times too confident still
  has its threshold inside;
- **lower**: the rest, where nearly every question is answerable and only their number matters.

``upper_share`` of the labels go to the upper stratum (all of it when it is smaller), the rest to
the lower; within a stratum the draw is uniform and seeded. Each chosen question carries the
inverse of its chance to be drawn (its ``weight``), so that the labelled questions stand for the
whole log without bias (a Horvitz-Thompson estimate), while the tail that sets the threshold is
measured on several times more labels than a random draw gives it.

:func:`weighted_point` chooses the threshold by weighted split-conformal prediction (Tibshirani et
al., 2019, "Conformal prediction under covariate shift"): the smallest threshold whose weighted
share of answerable questions at or above it, counting a new answerable question at the top, is at
most ``B``. Split-conformal counts that question whole, which keeps the rate refused below ``B``
by up to its weight's share and so catches less; it counts as half of one of its stratum here
(``TEST_POINT``). The false refusals and catches reported are the same weighted shares, with exact
intervals on Kish's effective number of labels.

The constants were chosen by the worst of six sets of people's questions, each standing for a
log (``benchmarks/studies/label_selection.py``; ``docs/research/calibration.md``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scopeguard.calibration._choose import OperatingPoint
from scopeguard.detection.profile import Rate, clopper_pearson
from scopeguard.errors import ConfigurationError

__all__ = [
    "TEST_POINT",
    "UPPER_SHARE",
    "UPPER_WIDTH",
    "Choice",
    "LabelledScore",
    "choose_to_label",
    "prior_threshold",
    "weighted_point",
    "weighted_rate",
]

#: the share of the labels that go to the upper stratum
UPPER_SHARE = 0.7
#: the upper stratum starts at the first guess of the threshold for this many budgets
UPPER_WIDTH = 4.0
#: the new answerable question counted at the top, as a share of one question of its stratum
TEST_POINT = 0.5


@dataclass(frozen=True)
class Choice:
    """A question chosen to be labelled: its stratum and its weight (how many questions of the
    log it stands for)."""

    id: str
    score: float
    stratum: str
    weight: float


@dataclass(frozen=True)
class LabelledScore:
    """A labelled question's score, label and weight."""

    score: float
    label: str
    weight: float = 1.0


def prior_threshold(scores: Sequence[float], budget: float) -> float:
    """The threshold for ``budget`` if each question were answerable with probability ``1 - score``
    (the detector's own belief): the lowest score whose tail holds at most ``budget`` of that mass."""
    ordered = sorted(scores, reverse=True)
    total = sum(1.0 - s for s in ordered)
    if total <= 0.0:
        return ordered[-1]
    tail, threshold = 0.0, 1.0
    for s in ordered:
        tail += 1.0 - s
        if tail / total > budget:
            break
        threshold = s
    return threshold


def choose_to_label(
    scores: Mapping[str, float],
    n: int,
    budget: float,
    *,
    seed: int = 0,
    upper_share: float = UPPER_SHARE,
    width: float = UPPER_WIDTH,
) -> list[Choice]:
    """``n`` of the log's questions (id -> score) to label, drawn as the module docstring says,
    in the order to label them (shuffled, so that a person labelling part of them still labels
    both strata)."""
    if n < 1:
        raise ConfigurationError(f"--select must choose at least 1 question, got {n}")
    ids = sorted(scores)
    if n >= len(ids):
        return [Choice(id=i, score=scores[i], stratum="all", weight=1.0) for i in ids]
    start = prior_threshold([scores[i] for i in ids], min(0.5, width * budget))
    upper = [i for i in ids if scores[i] >= start]
    lower = [i for i in ids if scores[i] < start]
    n_upper = min(len(upper), max(1, round(upper_share * n)))
    n_lower = min(len(lower), n - n_upper)
    n_upper = min(len(upper), n - n_lower)
    rng = random.Random(seed)
    chosen = [
        Choice(id=i, score=scores[i], stratum=name, weight=len(group) / k)
        for name, group, k in (("upper", upper, n_upper), ("lower", lower, n_lower))
        if k
        for i in rng.sample(group, k)
    ]
    rng.shuffle(chosen)
    return chosen


def weighted_rate(hits: Sequence[tuple[bool, float]], confidence: float = 0.95) -> Rate:
    """The weighted share of ``(hit, weight)`` pairs, with the exact interval of that share on
    Kish's effective number of observations; ``k`` and ``n`` count the observations."""
    n = len(hits)
    total = sum(w for _, w in hits)
    if n == 0 or total <= 0.0:
        return Rate(value=None, low=0.0, high=1.0, k=0, n=n)
    value = sum(w for h, w in hits if h) / total
    n_eff = max(1, round(total**2 / sum(w * w for _, w in hits)))
    low, high = clopper_pearson(min(n_eff, round(value * n_eff)), n_eff, confidence)
    return Rate(value=value, low=min(low, value), high=max(high, value), k=sum(h for h, _ in hits), n=n)


def weighted_point(labelled: Sequence[LabelledScore], budget: float, test_weight: float) -> OperatingPoint:
    """The weighted split-conformal threshold for ``budget`` (see the module docstring) and what it
    refuses and catches among the labelled questions, weighted. ``test_weight``: the weight of the
    one new answerable question counted at the top. A :class:`ConfigurationError` when the labels
    cannot promise the budget (too few answerable ones)."""
    answerable = sorted((q for q in labelled if q.label == "in_scope"), key=lambda q: q.score, reverse=True)
    total = sum(q.weight for q in answerable) + test_weight
    if not answerable or test_weight / total > budget:
        raise ConfigurationError(
            f"the {len(answerable)} answerable labels cannot promise a false-refusal budget of "
            f"{budget:g}: label more questions (--select) or allow a larger budget"
        )
    # the first answerable score (from the top) whose tail would pass the budget is answered; a tie
    # below it is answered too (the threshold never falls between equal scores)
    tail, threshold = test_weight, 1.0
    for q in answerable:
        if (tail + q.weight) / total > budget:
            threshold = min(1.0, math.nextafter(q.score, math.inf))
            break
        tail += q.weight
    out = [q for q in labelled if q.label == "out_of_scope"]
    return OperatingPoint(
        threshold=threshold,
        hedge_from=None,
        false_refusals=weighted_rate([(q.score >= threshold, q.weight) for q in answerable]),
        caught=weighted_rate([(q.score >= threshold, q.weight) for q in out]),
        hedged=None,
    )
