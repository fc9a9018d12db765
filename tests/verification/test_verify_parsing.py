"""The Yes / No / Not Related parser on reply shapes small and large models actually produce."""

from __future__ import annotations

import pytest

from scopeguard.verification import parse_verification


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Yes", "supported"),
        ("Yes.", "supported"),
        (" yes\n", "supported"),
        ("**Yes**", "supported"),
        ('"Yes"', "supported"),
        ("Yes, the answers are the same with respect to the question.", "supported"),
        ("Yes\n\nExplanation: both answers give 1931.", "supported"),
        ("1)Yes", "supported"),
        ("Classification: Yes", "supported"),
        ("**Classification result:** Yes", "supported"),
        ("No", "contradicted"),
        ("No.", "contradicted"),
        ("No, the answers are different.", "contradicted"),
        ("3) No", "contradicted"),
        ("Answer: No", "contradicted"),
        ("The answer is: No.", "contradicted"),
        ("Both mention the guild, but the years differ. The answer is: **No**", "contradicted"),
        ("Not Related", "not_related"),
        ("not related.", "not_related"),
        ("NOT RELATED", "not_related"),
        ("Not_Related", "not_related"),
        ("2) Not Related", "not_related"),
        ("Unrelated", "not_related"),
        ("I would classify this as Not Related.", "not_related"),
        ("'Not Related' - neither answer addresses the question", "not_related"),
    ],
)
def test_parses_the_three_classes(reply: str, expected: str) -> None:
    assert parse_verification(reply) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        None,
        "Maybe",
        "The two answers are similar.",
        "Yes or No",
        "Yes/No/Not Related",
        '("Yes", "Not Related", or "No")',
        "Answer1: the lighthouse was green",
        "Answer2: No information",
        "Nothing in the passage says so.",
        "Notably, the dates differ",
        "None",
        "I cannot determine this.",
        "The answer is: maybe",
    ],
)
def test_anything_else_is_unknown(reply: str | None) -> None:
    assert parse_verification(reply) == "unknown"


def test_last_final_answer_wins() -> None:
    reply = "At first the answer is: Yes. After checking the year, the answer is: No"
    assert parse_verification(reply) == "contradicted"
