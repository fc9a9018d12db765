"""A small invented corpus for the integration examples (fiction written for scopeguard; no real data)."""

from __future__ import annotations

__all__ = ["CORPUS", "IN_SCOPE_QUESTION", "OUT_OF_SCOPE_QUESTION"]

CORPUS: tuple[tuple[str, str], ...] = (
    (
        "history",
        "The Marlow Ridge Observatory was founded by the amateur astronomer Edith Vane in 1924. "
        "Construction of the dome took seven years, and the observatory opened to the public in 1931. "
        "Vane directed it until her retirement in 1958.",
    ),
    (
        "telescope",
        "The observatory's main instrument is a 61-centimetre reflecting telescope with a mirror "
        "ground in Glasgow. The dome rotates on twelve iron wheels and is turned by hand crank.",
    ),
    (
        "visiting",
        "Public viewing nights are held every clear Friday from October to March. Visitors climb "
        "214 steps from the car park; the observatory has no lift.",
    ),
    (
        "discoveries",
        "In 1947 volunteers at Marlow Ridge recorded the first sighting of comet Halvorsen-Pike, "
        "which returns roughly every 83 years.",
    ),
    (
        "village",
        "The village of Marlow lies below the ridge. Its bakery sells a star-shaped biscuit on "
        "viewing nights, and the parish hall hosts a winter lecture series on astronomy.",
    ),
)
"""``(id, text)`` pairs."""

IN_SCOPE_QUESTION = "In which year did the Marlow Ridge Observatory open to the public?"
"""Answered by the ``history`` passage."""

OUT_OF_SCOPE_QUESTION = "What salary did the observatory pay its night assistants during the war?"
"""Looks relevant (the observatory, night viewing) but no passage says anything about salaries."""
