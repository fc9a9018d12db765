"""absent_detail: the kind of detail a question asks for that its document states none of."""

from __future__ import annotations

import pytest

from scopeguard.generation.offline._absent import absent_detail

REVIEW = (
    "We stayed four nights near Union Square. The room was small but spotless, the staff helpful, "
    "and the cable car stop is a short walk away. Breakfast was good."
)

BOOK = (
    "I could not put this novel down. The Long Tide follows two sisters who run a lighthouse, and "
    "the storm chapters are the best I have read in years."
)


@pytest.mark.parametrize(
    ("question", "document", "kind"),
    [
        ("What is the price of a room at the hotel?", REVIEW, "price"),
        ("How much does it cost to stay there?", REVIEW, "price"),
        ("How much did they pay for the suite?", REVIEW, "price"),
        ("What is the price of a room at the hotel?", REVIEW + " We paid $189 a night.", None),
        ("What is the price of a room at the hotel?", REVIEW + " It cost 150 euros.", None),
        ("What is the price of a room at the hotel?", REVIEW + " Parking was free.", None),
        ("What is the hotel's address?", REVIEW, "address"),
        ("What is the hotel's address?", REVIEW + " It is at 333 O'Farrell Street.", None),
        ("What is the hotel's address?", REVIEW + " Hotel Adagio, San Francisco, CA 94102.", None),
        ("What is the hotel's address?", REVIEW + " It is on Geary and Jones Streets.", None),  # half O
        (
            "What is the hotel's address?",
            REVIEW + " Ask for a room away from Pine St (the trams).",
            None,
        ),  # half S
        ("What is the hotel's address?", REVIEW + " It was a fine place to stay.", "address"),
        ("In what year did the hotel open?", REVIEW, "year"),
        ("When was the hotel built?", REVIEW, "year"),
        ("When was the hotel built?", REVIEW + " It was built in 1926.", None),
        ("When was the hotel built?", REVIEW + " We went in March.", None),
        ("When did the hotel open?", REVIEW, "year"),  # a place's hint: the year it opened
        ("When did the hotel open?", REVIEW + " It opened in 1926.", None),
        ("When is the hotel open?", REVIEW, None),  # its hours, not a year
        ("How long has the hotel been open?", REVIEW, "year"),  # half S
        ("Where can I buy the case?", REVIEW, "store"),
        ("Where is this bar sold?", REVIEW + " I mean to buy more of these soon.", "store"),  # half T
        ("Where can I buy the case?", REVIEW + " It is the best case on the market.", "store"),
        ("Where can I buy the case?", REVIEW + " I bought it on Amazon.", None),
        ("Where can I buy the case?", REVIEW + " Any camera store has it.", None),
        ("Where can I buy the case?", REVIEW + " We picked it up at Gerlach's on the corner.", None),
        ("Where can I buy the case?", REVIEW + " We bought it at the farmer's market.", None),
        ("Where can I buy the case?", REVIEW + " I ordered it from the maker directly.", None),
        # a shop named in a sentence about buying, whatever its name (no list of shops, #59)
        ("Where can I buy the case?", REVIEW + " Brindlemart's price was the lowest.", None),
        ("Where can I buy the case?", REVIEW + " Delivery with Parcelnest took two days.", None),
        ("Where can I buy the case?", REVIEW + " I purchased it here after reading the reviews.", None),
        # a name in passing, in no sentence about buying, is no seller
        ("Where can I buy the case?", REVIEW + " It fits in my bag next to a Starbucks mug.", "store"),
        ("Where can I buy the case?", REVIEW + " I watch Netflix on the train with it.", "store"),
        ("Who wrote the book?", BOOK, "author"),
        ("Who is the author of The Long Tide?", BOOK, "author"),
        ("What is the name of the writer of the novel?", BOOK, "author"),
        ("Who wrote The Long Tide?", BOOK + " Nell Harrow is a master.", None),  # a name beside it
        ("Who wrote The Long Tide?", BOOK + " It is a novel by Harrow.", None),
        ("Who wrote The Long Tide?", BOOK + " Harrow's prose is spare.", None),
        ("Who wrote The Long Tide?", BOOK + " The author grew up on the coast.", None),
        ("Who wrote the review?", BOOK, None),  # the review's writer: writer_screen's
        ("Who published The Long Tide?", BOOK, None),
        # not a price, an address, a year, a shop or a writer: left to the filter
        ("How much does the suitcase weigh?", REVIEW, None),
        ("How far is the hotel from the airport?", REVIEW, None),
        ("When did the guests arrive at the hotel?", REVIEW, None),
        ("What did the guests eat for breakfast?", REVIEW, None),
    ],
)
def test_a_detail_is_absent_only_when_the_document_states_none_of_its_kind(
    question: str, document: str, kind: str | None
) -> None:
    assert absent_detail(question, document) == kind


def test_only_the_kinds_asked_for_are_read() -> None:
    # absent_stores=False reads price, address and year only, as before it
    assert absent_detail("Where can I buy the case?", REVIEW, ("price", "address", "year")) is None
    assert absent_detail("Who wrote the book?", BOOK, ("price", "address", "year", "store")) is None
    assert absent_detail("What is the price of the case?", REVIEW, ("price",)) == "price"


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        # a title's stop does not end the sentence: the shop's name stays with its price
        ("The price at St. Clair's was low. It works well.", None),
        # a stop glued to the next sentence ends it: the seller's sentence is read alone
        ("Great bars.Amazon's price was very low, so I stocked up.", None),
        # a stop before a lower-case word does not end one: where they were bought stays with it
        ("I bought these last week. they were cheap at Costco I think.", None),
        # a line break ends a sentence: a name on the next line is not where it was bought
        ("I will buy more soon.\nKroger is nearby and friendly.", "store"),
        # a person named beside a sale is no shop
        ("Mr. Holt sold it to me.Great stuff.", "store"),
        ("Dr. Lee gave me a bar. I will buy more. We loved them.", "store"),
    ],
)
def test_where_to_buy_reads_the_document_in_the_one_splitters_sentences(
    document: str, kind: str | None
) -> None:
    assert absent_detail("Where can I buy the bars?", document) == kind
