"""The final-verdict parser: robust to decoration, never a default label."""

from __future__ import annotations

import pytest

from scopeguard.parsing import parse_final_answer, split_rationale


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Because X. The answer is: Yes.", "yes"),
        ("The answer is: No", "no"),
        ("**The answer is: Yes.**", "yes"),
        ("The answer is: **No**.", "no"),
        ('The answer is "Yes"', "yes"),
        ("The answer is: 'no' since the text says so", "no"),
        ("the ANSWER is: yES!", "yes"),
        ("The answer is: [No]", "no"),
        ("The answer is:\n\nYes", "yes"),
        ("The final answer is: no", "no"),
        ("Answer: Yes", "yes"),
        # the last statement wins
        ("The answer is: No. On reflection... The answer is: Yes.", "yes"),
        # an echoed instruction is ambiguous and ignored; an earlier real answer still counts
        ("The answer is: Yes or No.", None),
        ("The answer is: Yes/No", None),
        ("I think no. The answer is: No\nThe answer is: Yes or No.", "no"),
        # an instruction echoed back quotes verdict lines: not the model's verdict
        ("If it answers, you should immediately conclude with 'The answer is: No.' even if", None),
        ("finally conclude with 'The answer is: Yes.' or 'The answer is: No.'.", None),
        ("End your response with The answer is: Yes", None),
        ("...conclude with 'The answer is: No.' It refuses. The answer is: Yes.", "yes"),
        ('It refuses. "The answer is: Yes."', "yes"),
        # no verdict at all: None, never a default label
        ("", None),
        ("The question mentions Paris, which is not in the document.", None),
        ("Yes.", None),
        ("The answer is: Not sure", None),
        ("The answer is: Nope", None),
        ("The answer is: maybe", None),
    ],
)
def test_parse_final_answer(text: str, expected: str | None) -> None:
    assert parse_final_answer(text) == expected


def test_custom_choices_are_returned_lower_cased() -> None:
    choices = ("in scope", "out of scope")
    assert parse_final_answer("The answer is: Out of Scope.", choices) == "out of scope"
    assert parse_final_answer("The answer is: in scope", choices) == "in scope"
    assert parse_final_answer("The answer is: yes", choices) is None


def test_split_rationale_drops_the_final_statement() -> None:
    assert split_rationale("The text names no CEO.\n\n**The answer is: Yes.**") == "The text names no CEO."
    assert split_rationale("only reasoning") == "only reasoning"
