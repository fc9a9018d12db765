"""The screen for prompt-example phrases in generated questions, and the varied perturbation examples."""

from __future__ import annotations

import re

import pytest

from scopeguard.detection.read.text import STOPWORDS
from scopeguard.generation.config import EDIT_KINDS, GenerationConfig
from scopeguard.generation.offline._natural import (
    about_writer,
    asks_name,
    asks_writer_name,
    copied_phrase,
    odd_detail,
    two_things,
    unnatural,
    unwritten_name,
)
from scopeguard.generation.offline._out_of_scope import example_index
from scopeguard.generation.offline._screens import unanswered
from scopeguard.generation.offline._subjects import (
    named_late,
    not_about,
    other_thing,
    stand_in,
    subject_as_written,
    subject_in_document,
    with_article,
)
from scopeguard.generation.offline._vocabulary import FIXED_ARTEFACTS
from scopeguard.prompts import available_templates, render, template_examples

# a document that shares no invented name or topic with any template's examples
BAKERY = (
    "The Marsh Lane bakery opened in 1998. Its owner, Rosa Vent, trained in Lyon and bakes rye "
    "bread every morning. The shop is closed on Mondays and sells about 400 loaves a week."
)
GENERATION = [t for t in available_templates() if t.startswith("gen_")]


@pytest.mark.parametrize("name", GENERATION)
def test_no_question_may_copy_any_phrase_of_a_generation_templates_examples(name: str) -> None:
    """Three words in a row from any example of any generation template, inside a question the
    writer made about another document, are found (unless they are function words alone)."""
    checked = 0
    bakery = set(re.findall(r"[a-z0-9]+", BAKERY.lower()))
    for text in template_examples(name):
        words = re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())
        for i in range(len(words) - 2):
            window = words[i : i + 3]
            if sum(w not in STOPWORDS for w in window) < 2:
                continue  # "what is the", "paid for the": everyday English
            if any(w in bakery for w in window):
                continue  # the document's own words
            checked += 1
            question = f"Did Rosa Vent say {' '.join(window)} at the bakery?"
            assert copied_phrase(question, BAKERY) is not None, (name, window)
    assert checked or not template_examples(name)


def test_every_example_question_of_the_perturbation_prompt_is_screened() -> None:
    questions = [t for t in template_examples("gen_perturb_question") if t.endswith("?")]
    assert len(questions) == 4 * (1 + len(EDIT_KINDS))  # four worked examples, every kind
    for q in questions:
        assert copied_phrase(q, BAKERY) is not None, q


@pytest.mark.parametrize(
    "question",
    [
        "When did the Marsh Lane bakery open?",
        "Where did Rosa Vent train before she opened the bakery?",
        "How many loaves of rye bread does the bakery sell on Mondays?",
        "What is the price of a loaf at the Marsh Lane bakery?",
        "Why is the shop closed on Mondays?",
        "Who took over the bakery from Rosa Vent in 2015?",
    ],
)
def test_the_writers_own_questions_pass(question: str) -> None:
    assert copied_phrase(question, BAKERY) is None


def test_a_phrase_the_document_uses_is_not_a_copy() -> None:
    council = "The council of Alderby approved the harbour plan. It will cost 3 million."
    assert copied_phrase("When did the council of Alderby reject the harbour plan?", BAKERY) is not None
    assert copied_phrase("How much will the harbour plan cost?", council) is None
    assert copied_phrase("Why did the council delay the vote?", "The council met on Monday.") is None


@pytest.mark.parametrize("artefact", FIXED_ARTEFACTS)
def test_fixed_artefacts_are_dropped_unless_the_document_says_them(artefact: str) -> None:
    question = f"When did Rosa Vent open the bakery {artefact}?"
    assert copied_phrase(question, BAKERY) == f'holds "{artefact}", a phrase small models add to any question'
    assert copied_phrase(question, BAKERY + f" It reopened {artefact} in 2004.") is None


def test_the_perturbation_prompt_shows_one_of_four_examples_chosen_by_the_source() -> None:
    shown = {
        render("gen_perturb_question", question="Q?", kinds=["negation"], example=i, firm=False)
        .split('Example question: "', 1)[1]
        .split('"', 1)[0]
        for i in range(8)
    }
    assert len(shown) == 4
    sources = [f"When did shop {i} open?" for i in range(40)]
    assert len({example_index(s) % 4 for s in sources}) == 4
    assert example_index(sources[0]) == example_index(sources[0])  # reproducible: the cache holds


def test_the_offline_defaults_leave_out_the_kinds_that_read_unnaturally() -> None:
    kinds = GenerationConfig().perturb_kinds
    assert set(kinds) == {"negation", "antonym", "entity_swap", "other_neutral"}
    assert GenerationConfig(perturb_kinds=EDIT_KINDS).perturb_kinds == EDIT_KINDS  # still available
    assert "natural" in GenerationConfig().screens and "natural" not in GenerationConfig.paper().screens


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("What did you think of the rye bread?", "asks the document's writer (you), not the document"),
        ("Where did Rosa Vent train, and who taught her?", "asks two questions at once"),
        ("What is the name of Marsh Lane?", "asks the name of something already named"),
        ("What is the name of the baker who trained Rosa Vent?", None),
    ],
)
def test_questions_no_one_would_send_are_screened(question: str, reason: str | None) -> None:
    assert unnatural(question, BAKERY) == reason


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("What was the person's name?", "asks about the document's writer (the person), not the document"),
        (
            "Why did the speaker praise the pier?",
            "asks about the document's writer (the person), not the document",
        ),
        ("What is the name of the person who built the pier?", None),  # someone else
        ("Where did the narrator of the novel grow up?", None),  # a novel's narrator
        ("Who paid for the harbour plan of Wrenfield?", None),
    ],
)
def test_a_question_about_the_writer_as_the_person_is_screened(question: str, reason: str | None) -> None:
    assert about_writer(question) == reason


def test_an_in_scope_question_asking_the_writers_name_is_screened() -> None:
    assert "does not give" in (asks_writer_name("What is the name of the person who baked the rye?") or "")
    assert asks_writer_name("What is the name of the bakery on Marsh Lane?") is None


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("What is the price of the X10 and X20?", "asks about two things at once (X10 and X20)"),
        (
            "What is the address of the bar and restaurant?",
            "asks about two things at once (bar and restaurant)",
        ),
        ("What is the price of the rye bread & butter?", "asks about two things at once (bread and butter)"),
        ("Where can I buy a copy at Barnes and Noble?", None),  # one name
        ("When was Pride and Prejudice first published?", None),
        ("What is the price of the rye bread?", None),
    ],
)
def test_an_unstated_question_about_two_things_joined_by_and_is_screened(
    question: str, reason: str | None
) -> None:
    assert two_things(question) == reason


def test_two_things_the_document_writes_joined_are_one() -> None:
    review = (
        "Rosa Vent's Bread and the Sea is her best book; the rye bread & butter plate at the bakery is fine."
    )
    assert two_things("When was Bread and the Sea published?", review) is None  # a title
    assert (
        two_things("When was Bread and the Sea published?") == "asks about two things at once (Bread and the)"
    )
    assert two_things("What is the price of the rye bread and butter?", review) is None
    assert two_things("What is the price of the bread and the sea salt?", BAKERY) is not None


@pytest.mark.parametrize(
    ("subject", "named"),
    [
        ("Crusty Rye Loaf", "the crusty rye loaf"),  # a description the review writes in lower case
        ("The Harbour bakery", "the harbour bakery"),
        ("The Marsh Lane bakery", "the Marsh Lane bakery"),  # an article the review does not give
        ("Rosa Vent", "Rosa Vent"),  # written so
        ("Ryeland", "Ryeland"),  # one word: a name written in lower case is the writer's slip
        ("BX-20 Mixer", "BX-20 Mixer"),  # digits: a model
        ("Golden Crumb Bakery", "Golden Crumb Bakery"),  # never written
    ],
)
def test_a_subject_is_named_as_its_document_writes_it(subject: str, named: str) -> None:
    review = (
        "This crusty rye loaf from the harbour bakery is the best in town. Rosa Vent bakes it at "
        "the Marsh Lane bakery with ryeland flour and her old bx-20 mixer."
    )
    assert subject_as_written(subject, review) == named


@pytest.mark.parametrize(
    ("subject", "kind", "named"),
    [
        ("Marsh Lane bakery", "place", "Marsh Lane bakery"),  # every word written
        ("The Bakery of Rosa Vent", "place", "The Bakery of Rosa Vent"),  # in any order and case
        ("Rosa's rye loaves", "product", "Rosa's rye loaves"),  # a possessive, a plural
        ("the rye breads of the bakeries", "product", "the rye breads of the bakeries"),  # plurals
        ("Lyon Road bakery", "place", "the bakery"),  # "road": never written; "the ... bakery" early
        ("Lyon Bread Company", "place", "the place"),  # nor "company", "place", "hotel": its kind
        ("Sourdough", "product", "the product"),
        ("Rosa Vent's memoir", "book", "the book"),
        ("Harbour Festival", "event", ""),  # no kind's name: what each sentence names
        ("", "product", ""),
    ],
)
def test_a_subject_with_a_word_the_document_never_writes_is_named_as_the_document_calls_it_or_by_its_kind(
    subject: str, kind: str, named: str
) -> None:
    assert subject_in_document(subject, kind, BAKERY) == named


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        (
            "What is the price of the Lyon flour mill?",  # BAKERY names Lyon, never beside "bakery"
            "about another thing the document names (Lyon), not its subject (the Marsh Lane bakery)",
        ),
        ("When did the Marsh Lane bakery close?", None),  # the subject's words
        ("What is the price of the bread?", None),  # names nothing
        ("What is the price of the Kelso loaf?", None),  # a name the document does not write
    ],
)
def test_a_question_about_another_thing_the_document_names_is_found(
    question: str, reason: str | None
) -> None:
    assert other_thing(question, "the Marsh Lane bakery", BAKERY) == reason
    # a name the document writes in a sentence with the subject's words is the subject's
    runs = BAKERY + " Rosa Vent runs the bakery; Lyon flour goes into every bakery loaf."
    assert other_thing(question, "the Marsh Lane bakery", runs) is None


@pytest.mark.parametrize(
    ("question", "odd"),
    [
        ("When is the rye bread available?", True),
        ("When are the loaves available at the Marsh Lane bakery?", True),
        ("When does the bakery open?", True),
        ("When is the bakery open?", True),
        ("What are the opening hours of the bakery?", True),
        ("How long has the bakery been open?", False),  # a year
        ("When did the bakery open?", False),  # a year
        ("Is the rye bread available in Lyon?", False),  # where, not when
        ("What is the price of the rye bread?", False),
    ],
)
def test_a_question_asking_when_it_is_available_or_open_is_found(question: str, odd: bool) -> None:
    assert (odd_detail(question) is not None) == odd


@pytest.mark.parametrize(
    ("subject", "named"),
    [
        ("soda", "the soda"),  # one soda's review, named in lower case
        ("ginger tea", "the ginger tea"),
        ("the rye bread", "the rye bread"),  # its article already
        ("this coffee", "this coffee"),
        ("Essentia", "Essentia"),  # a name
        ("Hotel Nikko", "Hotel Nikko"),
        ("", ""),
    ],
)
def test_a_subject_named_in_lower_case_gets_its_article(subject: str, named: str) -> None:
    assert with_article(subject) == named


REVIEW = (
    "The Marsh Lane bakery sells rye bread. Its loaves keep for a week. The crust is dark and the "
    "crumb is soft. The shop is busy on Saturdays. Prices are fair. I tried the Lyon bakery once, "
    "and its rye was dry. I will go back to Marsh Lane."
)


@pytest.mark.parametrize(
    ("subject", "kind", "late"),
    [
        ("Lyon bakery", "place", True),  # "Lyon" first in sentence 6 of 7 (not at the first "bakery")
        ("Marsh Lane bakery", "place", False),  # named in the first sentence
        ("the rye bread", "product", False),  # "rye" in the first sentence
        ("Kelso", "place", False),  # never named: left to subject_in_document
        ("the hotel", "place", False),  # only the kind's word: nothing to place
    ],
)
def test_a_subject_first_named_late_is_found(subject: str, kind: str, late: bool) -> None:
    assert named_late(subject, kind, REVIEW) is late


@pytest.mark.parametrize(
    ("subject", "kind", "document", "instead"),
    [
        ("Lyon bakery", "place", REVIEW, "the bakery"),  # "The Marsh Lane bakery", first sentence
        (
            "Nexus case",
            "product",
            "The case fits well. It is slim. I like it. Better than my Nexus.",
            "the case",
        ),
        # its last word only late; the kind's word anywhere, after a determiner
        (
            "Nexus sleeve",
            "product",
            "It fits. It is slim. I like it. A great product, this sleeve.",
            "the product",
        ),
        # a name ("Waihopai") is not what it is called; "took place" is not "the place"
        ("GCSB Waihopai", "place", "A protest took place. It was peaceful. Then GCSB Waihopai closed.", ""),
    ],
)
def test_a_subject_the_document_does_not_bear_out_is_asked_about_as_the_document_calls_it(
    subject: str, kind: str, document: str, instead: str
) -> None:
    assert stand_in(subject, kind, document) == instead


@pytest.mark.parametrize(
    ("question", "subject", "kind", "about"),
    [
        ("What is the price of the rye flour?", "the Marsh Lane bakery", "place", False),
        ("Where is Lyon's flour mill?", "the Marsh Lane bakery", "place", False),
        ("When did the Marsh Lane bakery open?", "the Marsh Lane bakery", "place", True),  # its words
        ("Who owns the bakeries on Marsh Lane?", "the Marsh Lane bakery", "place", True),  # a plural
        ("What is the address of the hotel?", "the Marsh Lane bakery", "place", True),  # its kind's word
        ("Where can I buy it?", "the Marsh Lane bakery", "place", True),  # "it" is the subject
        ("What is this place's address?", "the Marsh Lane bakery", "", True),
        ("What is the price of the rye flour?", "the product", "product", False),  # a kind's name
        ("What is the price of the product?", "the product", "product", True),
        ("What is the price of the rye flour?", "", "", True),  # no subject named: nothing to be about
    ],
)
def test_a_question_not_about_the_subject_is_found(
    question: str, subject: str, kind: str, about: bool
) -> None:
    reason = not_about(question, subject, kind)
    assert (reason is None) == about
    if not about:
        assert reason == f"not about the document's subject ({subject}): no word of it, nor 'it'"


def test_an_enumeration_in_one_reply_is_found_whole() -> None:
    from scopeguard.generation.offline._keeper import enumerations

    reply = [
        "What was the person's second thought about the book?",
        "What was the person's third thought about the book?",
        "When was the trilogy released?",
        "What was the person's 4th thought about the book?",
        "What is the price of the trilogy?",
        "What is the price of the book?",  # one word changed, but not a count: two real questions
    ]
    assert enumerations(reply) == {0, 1, 3}
    assert enumerations(["When does the first ferry leave the harbour?"]) == set()


def test_a_details_synonyms_read_as_one_word() -> None:
    from scopeguard.detection.read.text import content_stems
    from scopeguard.generation.offline._keeper import synonyms_as_one

    def one(question: str) -> frozenset[str]:
        return synonyms_as_one(frozenset(content_stems(question)))

    assert one("How far is the Omni from the city centre?") == one(
        "What is the distance of the Omni from the city center?"
    )
    assert one("What does the Roku cost?") == one("What is the price of the Roku?")
    assert one("Where can I buy the Roku?") == one("Where is the Roku sold?")
    assert one("Who built the Roku?") != one("Who sold the Roku?")
    assert one("Where are the drives sold?") == one("Where is the drive sold?")  # read on half P
    assert one("Who directed the movies?") == one("Who directed the movie?")


@pytest.mark.parametrize(
    ("question", "answer", "reason"),
    [
        # the writer asked for what its sentence does not name
        ("What is the name of the restaurant?", "Chez Marcel", "its answer is not in its sentence"),
        ("What is the name of the restaurant?", "the restaurant", "it states its own answer"),
        ("Which paper praised the restaurant?", "Harbour Gazette", None),
        ("How many calories does the drink have?", "90", None),
        ("What did the restaurant get?", "a", "its answer names nothing"),
    ],
)
def test_an_in_scope_question_whose_answer_its_sentence_lacks_is_screened(
    question: str, answer: str, reason: str | None
) -> None:
    sentence = "Lovely restaurant, praised by the Harbour Gazette, and only 90 calories a drink."
    assert unanswered(question, answer, sentence) == reason


@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("How many loaves does the Marsh Lane bakery sell in France?", "France"),  # never written
        ("What did Rosa Vent pay for the United States franchise?", "United"),
        ("When did the Marsh Lane bakery open its second shop?", None),  # its names, any case
        ("What does Rosa Vent's rye bread cost?", None),  # a possessive of a written name
        ("What does the Marsh Lane bakery charge on Mondays?", None),
        ("When is the bakery open? Is it open on Sundays?", None),  # a day, a sentence's first word
        ("Does the Marsh Lane bakery close in August?", None),  # a month
        ("Who trained Rosa Vent in Lyonnais baking?", "Lyonnais"),
        ("How much does the rye bread cost in the Lyon shop?", None),
    ],
)
def test_a_question_naming_what_its_document_never_writes_is_found(question: str, name: str | None) -> None:
    from scopeguard.detection.read.text import content_stem_set

    reason = unwritten_name(question, BAKERY, content_stem_set(BAKERY))
    assert reason == (None if name is None else f"names what its document never writes ({name})")
    # a name glued to the word before it is written all the same
    glued = BAKERY + " For a sweeter loaf I recommendKelso Rye."
    assert unwritten_name("What does Kelso Rye cost?", glued, content_stem_set(glued)) is None


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("What is the name of the hotel's owner?", True),
        ("What are the names of the other bakers?", True),
        ("What is the head baker's name?", True),
        ("What is the Marsh Lane bakery's sourdough called?", True),
        ("Who named the Marsh Lane bakery?", False),  # who named it, not its name
        ("Is the bakery called to inspections often?", False),  # "called", not a name asked
        ("What is the price of a rye loaf?", False),
    ],
)
def test_an_out_of_scope_question_asking_for_a_name_is_found(question: str, asks: bool) -> None:
    assert (asks_name(question) is not None) is asks


def test_a_decade_is_a_count_of_an_enumeration() -> None:
    from scopeguard.generation.offline._keeper import enumerations

    decades = ["What did Rosa Vent bake in the 1960s?", "What did Rosa Vent bake in the 1970s?"]
    assert enumerations(decades) == {0, 1}
    assert enumerations(["What did Rosa Vent bake in Lyon?", "What did Rosa Vent bake in Paris?"]) == set()
