"""The kinds of edit that make an answerable question unanswerable (the ``perturb`` mode's).

Published by :mod:`scopeguard.generation.config` (``perturb_kinds``) and read by the screens
(:mod:`scopeguard.generation.offline._screens`), which apply their out-of-scope rules to every kind.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["EDIT_KINDS", "EditKind"]

# The kinds of edit SQuAD 2.0's crowdworkers used to make answerable questions unanswerable
# (Rajpurkar et al., 2018, "Know What You Don't Know", section 3, Table 2).
EditKind = Literal[
    "negation", "antonym", "entity_swap", "mutual_exclusion", "impossible_condition", "other_neutral"
]
EDIT_KINDS: tuple[EditKind, ...] = (
    "negation",
    "antonym",
    "entity_swap",
    "mutual_exclusion",
    "impossible_condition",
    "other_neutral",
)
