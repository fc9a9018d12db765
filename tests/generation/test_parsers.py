"""The strict reply parsers on reply shapes seen from real models, including their failure modes."""

from __future__ import annotations

import pytest

from scopeguard.errors import LLMResponseError
from scopeguard.generation.parsers import (
    MISSING,
    ReplyParseError,
    parse_claims,
    parse_guesses,
    parse_numbered,
    parse_question_list,
    parse_questions_by_number,
    parse_recovered,
    parse_remaining,
)

FACTS = [
    "The Alderby council approved a harbour budget of two million crowns.",
    "Mayor Ona Pell said construction would begin in April.",
    "The old ferry terminal has been closed since 2019.",
]


def test_numbered_list_with_preamble_bold_and_closing_remark() -> None:
    reply = (
        "Sure! Here are the 3 most important facts:\n\n"
        "**1.** The council met on Monday.\n"
        "2) The budget was approved\n   by five votes to two.\n"
        "Fact 3: The mayor spoke last.\n\n"
        "I hope this helps! Let me know if you need more."
    )
    assert parse_claims(reply, 3) == [
        "The council met on Monday.",
        "The budget was approved by five votes to two.",
        "The mayor spoke last.",
    ]


def test_wrong_count_is_an_error_with_a_reason() -> None:
    with pytest.raises(ReplyParseError) as err:
        parse_claims("1. A.\n2. B.", 3)
    assert err.value.reason == "wrong_count"
    assert isinstance(err.value, LLMResponseError)


def test_missing_number_is_not_silently_reindexed() -> None:
    with pytest.raises(ReplyParseError) as err:
        parse_claims("1. A fact.\n2. B fact.\n4. D fact.", 3)
    assert err.value.reason == "bad_numbering"


def test_list_not_starting_at_one_and_no_list() -> None:
    with pytest.raises(ReplyParseError, match="bad_numbering"):
        parse_claims("2. B.\n3. C.\n4. D.", 3)
    with pytest.raises(ReplyParseError, match="no_list"):
        parse_claims("The document talks about a harbour.", 3)


def test_truncated_reply_drops_the_cut_item() -> None:
    reply = "1. First fact.\n2. Second fact.\n3. Third fa"
    assert len(parse_numbered(reply, truncated=True)) == 2
    with pytest.raises(ReplyParseError) as err:
        parse_claims(reply, 3, truncated=True)
    assert err.value.reason == "truncated"


def test_repeated_list_keeps_the_first_copy() -> None:
    reply = "1. A fact.\n2. B fact.\n\nAgain:\n1. A fact.\n2. B fact."
    assert parse_claims(reply, 2) == ["A fact.", "B fact."]


def test_lenient_accepts_fewer_well_formed_items_only_when_asked() -> None:
    reply = "1. A fact.\n2. B fact.\n3. C fact."
    with pytest.raises(ReplyParseError):
        parse_claims(reply, 6)
    assert parse_claims(reply, 6, lenient=True) == ["A fact.", "B fact.", "C fact."]
    assert parse_claims("1. A.\n2. B.\n3. C.", 2, lenient=True) == ["A.", "B."]


def test_recovery_full_list_round_trip() -> None:
    facts = [FACTS[0], MISSING, FACTS[2]]
    reply = (
        "Completed list:\n"
        f"1. {FACTS[0]}\n"
        "2. Mayor Ona Pell said the harbour project would be paid by a lottery grant.\n"
        f"3. {FACTS[2]}"
    )
    assert parse_recovered(reply, facts, [1]) == {
        1: "Mayor Ona Pell said the harbour project would be paid by a lottery grant."
    }


def test_recovery_only_the_missing_ones_maps_in_order() -> None:
    facts = [MISSING, FACTS[1], MISSING]
    reply = (
        "1. A new bridge will connect the harbour to the island.\n2. The ferry company went bankrupt in 2018."
    )
    got = parse_recovered(reply, facts, [0, 2])
    assert got == {
        0: "A new bridge will connect the harbour to the island.",
        2: "The ferry company went bankrupt in 2018.",
    }


def test_recovery_shifted_indices_are_rejected() -> None:
    facts = [FACTS[0], MISSING, FACTS[2]]
    # the model dropped fact 1 and renumbered: item 1 is now the recovered fact, item 3 is unrelated
    reply = f"1. The harbour will get a new lighthouse.\n2. {FACTS[0]}\n3. {FACTS[2]}"
    with pytest.raises(ReplyParseError) as err:
        parse_recovered(reply, facts, [1])
    assert err.value.reason == "shifted"


def test_recovery_still_missing_or_copied() -> None:
    facts = [FACTS[0], MISSING, FACTS[2]]
    with pytest.raises(ReplyParseError, match="not_recovered"):
        parse_recovered(f"1. {FACTS[0]}\n2. (missing)\n3. {FACTS[2]}", facts, [1])
    with pytest.raises(ReplyParseError, match="copied"):
        parse_recovered(f"1. {FACTS[0]}\n2. {FACTS[2]}\n3. {FACTS[2]}", facts, [1])
    with pytest.raises(ReplyParseError, match="wrong_count"):
        parse_recovered(f"1. {FACTS[0]}\n2. {FACTS[2]}", facts, [1])


def test_remaining_keeps_original_numbers_and_checks_text() -> None:
    reply = f"Remaining hallucinated facts:\n1. {FACTS[0]}\n3. {FACTS[2]}"
    assert parse_remaining(reply, FACTS) == [0, 2]
    assert parse_remaining("None.", FACTS) == []
    with pytest.raises(ReplyParseError, match="mismatch"):
        parse_remaining(f"1. {FACTS[2]}", FACTS)  # renumbered from 1: never re-mapped
    with pytest.raises(ReplyParseError, match="bad_numbering"):
        parse_remaining(f"7. {FACTS[2]}", FACTS)
    with pytest.raises(ReplyParseError, match="empty"):
        parse_remaining("", FACTS)


def test_questions_by_number_allow_omissions_but_not_junk() -> None:
    reply = (
        "Questions:\n1. Why did the council choose a lottery grant?\n"
        "3. When did the ferry company go bankrupt?"
    )
    assert parse_questions_by_number(reply, 3) == {
        0: "Why did the council choose a lottery grant?",
        2: "When did the ferry company go bankrupt?",
    }
    with pytest.raises(ReplyParseError, match="not_a_question"):
        parse_questions_by_number("1. The council chose a grant.", 3)
    with pytest.raises(ReplyParseError, match="bad_numbering"):
        parse_questions_by_number("1. Why?\n1. How?", 3)
    with pytest.raises(ReplyParseError, match="bad_numbering"):
        parse_questions_by_number("5. Why did it happen?", 3)


def test_questions_by_number_lenient_keeps_numbered_questions_and_never_moves_one() -> None:
    # A shape seen from the 0.5B model: asked about one fact, it repeats the question down a list.
    repeated = "\n".join(f"{k}. Why did the ferry company stop the night crossing?" for k in range(1, 5))
    with pytest.raises(ReplyParseError, match="bad_numbering"):
        parse_questions_by_number(repeated, 1)
    assert parse_questions_by_number(repeated, 1, lenient=True) == {
        0: "Why did the ferry company stop the night crossing?"
    }
    mixed = "1. The council chose a grant.\n2. Who paid for the new pier?\n2. Who built it?\n7. Why?"
    assert parse_questions_by_number(mixed, 2, lenient=True) == {1: "Who paid for the new pier?"}
    with pytest.raises(ReplyParseError, match="no_question"):
        parse_questions_by_number("1. The council chose a grant.\n4. Why?", 2, lenient=True)


def test_question_list_strips_labels_and_quotes() -> None:
    reply = '1. Question: "What budget did the council approve for the harbour?"\n2. **Who is the mayor?**'
    assert parse_question_list(reply, 2) == [
        "What budget did the council approve for the harbour?",
        "Who is the mayor?",
    ]
    assert parse_question_list(reply, 3, lenient=True) == [
        "What budget did the council approve for the harbour?",
        "Who is the mayor?",
    ]
    with pytest.raises(ReplyParseError, match="wrong_count"):
        parse_question_list(reply, 3)


def test_recovery_lenient_aligns_by_content_after_a_retry() -> None:
    # a real 0.5B reply shape: the (missing) lines were dropped, the list renumbered, guesses appended
    facts = [FACTS[0], MISSING, FACTS[2], MISSING]
    reply = f"1. {FACTS[0]}\n2. {FACTS[2]}\n3. The ferry returns in May.\n4. A bridge was planned in 1990."
    with pytest.raises(ReplyParseError, match="shifted"):
        parse_recovered(reply, facts, [1, 3])
    assert parse_recovered(reply, facts, [1, 3], lenient=True) == {
        1: "The ferry returns in May.",
        3: "A bridge was planned in 1990.",
    }
    copies_only = f"1. {FACTS[0]}\n2. {FACTS[0]}\n3. {FACTS[2]}\n4. {FACTS[2]}"
    with pytest.raises(ReplyParseError, match="not_recovered"):
        parse_recovered(copies_only, facts, [1, 3], lenient=True)


# Guesses-only replies (the fallback prompt): the small model's real shapes, numbered by the
# missing facts, numbered from 1, with a preamble, with a copy of a listed fact.
SIX = [f"Fact {i} about the Alderby harbour plan and its {w}." for i, w in enumerate("abcdef", 1)]


def test_guesses_numbered_by_the_missing_facts() -> None:
    facts = [MISSING if i in (0, 3) else f for i, f in enumerate(SIX)]
    reply = "Here are my guesses:\n4. A tram line reached the pier.\n1. The museum opened in 1887."
    guesses, rejected = parse_guesses(reply, facts, [0, 3])
    assert guesses == {0: "The museum opened in 1887.", 3: "A tram line reached the pier."}
    assert rejected == []


def test_guesses_numbered_from_one_map_in_order() -> None:
    facts = [MISSING if i in (1, 4) else f for i, f in enumerate(SIX)]
    guesses, _ = parse_guesses("1. The pier is 300 m long.\n2. Ferries run hourly.", facts, [1, 4])
    assert guesses == {1: "The pier is 300 m long.", 4: "Ferries run hourly."}


def test_a_copied_guess_is_left_out_and_reported() -> None:
    facts = [MISSING if i in (0, 3) else f for i, f in enumerate(SIX)]
    reply = f"1. The museum opened in 1887.\n4. {SIX[1]}"  # fact 4's guess copies fact 2
    guesses, rejected = parse_guesses(reply, facts, [0, 3])
    assert guesses == {0: "The museum opened in 1887."} and rejected == [3]


def test_guesses_that_are_all_copies_or_missing_are_an_error() -> None:
    facts = [MISSING if i in (0, 3) else f for i, f in enumerate(SIX)]
    with pytest.raises(ReplyParseError) as err:
        parse_guesses(f"1. (missing)\n4. {SIX[2]}", facts, [0, 3])
    assert err.value.reason == "not_recovered"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I cannot guess these facts.", "no_list"),
        ("2. A guess.\n5. Another guess.", "bad_numbering"),  # numbers of kept facts
        ("1. A guess.\n2. Another.\n3. A third.", "bad_numbering"),  # too many
    ],
)
def test_guesses_with_other_numbers_are_never_reindexed(reply: str, reason: str) -> None:
    facts = [MISSING if i in (0, 3) else f for i, f in enumerate(SIX)]
    with pytest.raises(ReplyParseError) as err:
        parse_guesses(reply, facts, [0, 3])
    assert err.value.reason == reason


def test_lenient_guesses_keep_only_items_under_a_missing_number() -> None:
    facts = [MISSING if i in (0, 3) else f for i, f in enumerate(SIX)]
    reply = "1. The museum opened in 1887.\n5. A tram line reached the pier."  # 5 is no missing fact
    with pytest.raises(ReplyParseError):
        parse_guesses(reply, facts, [0, 3])
    guesses, rejected = parse_guesses(reply, facts, [0, 3], lenient=True)
    assert guesses == {0: "The museum opened in 1887."} and rejected == [3]  # fact 4 got no guess
    with pytest.raises(ReplyParseError):
        parse_guesses("2. A guess.\n5. Another guess.", facts, [0, 3], lenient=True)


def test_a_guess_repeating_another_guess_is_left_out() -> None:
    facts = [MISSING if i in (0, 3, 4) else f for i, f in enumerate(SIX)]
    reply = "1. He showed up for us.\n4. He showed up for us.\n5. The pier opened in 1901."
    guesses, rejected = parse_guesses(reply, facts, [0, 3, 4])
    assert guesses == {0: "He showed up for us.", 4: "The pier opened in 1901."} and rejected == [3]


def test_a_label_repeating_the_item_number_is_stripped() -> None:
    reply = (
        "1. Fact 1: The pier reopened in May.\n4. **Fact 4:** A toll was added.\n5. Fact 2: Kept as written."
    )
    assert [it.text for it in parse_numbered(reply)] == [
        "The pier reopened in May.",
        "A toll was added.",
        "Fact 2: Kept as written.",  # another number's label is left alone: never guess what was meant
    ]
