"""Questions asking for a kind of detail their document states none of: a price, an address, a year,
where to buy it, who wrote it.

A question asking a price is unanswerable from a document that names no amount of money, whatever
a reading model says. The packaged 1.5B filter often reads such questions as answerable, or doubts
them ("What is the hotel's address?" of a hotel review that gives none, "What is the price of the
Chromecast?" of one naming no amount, "Where can I buy ...?" of one naming no shop), and drops them,
which leaves documents short of out-of-scope questions; the questions this rule decides over the
filter were read by hand as unanswerable (``absent_details``, ``absent_stores`` and
``absent_authors`` in ``docs/research/generation-history.md``).

:func:`absent_detail` names the detail a question asks for when its document states none of that
kind, which the offline modes let decide over the filter. The kinds are few and their forms plain
on purpose: a detail the document might state in words a pattern misses (a distance: "a short
walk"; a name) is left to the filter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from scopeguard._sentences import split_sentences
from scopeguard.generation.offline._vocabulary import MONTHS

__all__ = ["ABSENT_KINDS", "absent_detail"]

# whether a document states a detail of the kind a question asks for: (question, document) -> bool
_States = Callable[[str, str], bool]


def _writes(pattern: re.Pattern[str]) -> _States:
    """The document states it where it writes ``pattern``, whatever the question."""
    return lambda question, document: pattern.search(document) is not None


_CAPITALISED_RUN = re.compile(r"\b[A-Z][\w'.-]*(?: [A-Z][\w'.-]*)+")


def _asked(question: str) -> set[str]:
    """The words of ``question`` in lower case: a name made only of them is the question's own."""
    return {w.lower() for w in re.findall(r"[\w'-]+", question)}


def _names_beside(question: str, document: str) -> bool:
    """Whether ``document`` writes a name of two or more capitalised words the question does not
    (its title, "The Road", is the question's; a title led by "The" or "A" is no name): "Cormac
    McCarthy is a master" and "J.K. Rowling" may name the author."""
    asked = _asked(question)
    for run in _CAPITALISED_RUN.finditer(document):
        words = [w.strip(".").lower() for w in run.group(0).split()]
        if words[0] in ("the", "a", "an"):
            continue
        if any(w not in asked for w in words):
            return True
    return False


_AUTHOR_WORDS = re.compile(
    r"\b(?i:authors?|authored|writers?|wrote|written|writes|writing|novelist|pen name|poet)\b"
    r"|\b(?i:by) [A-Z]|\b(?:Mr|Mrs|Ms|Dr)\.? [A-Z]"
    r"|\b[A-Z][\w.-]*'s? (?i:books?|novels?|series|memoir|stories|story|prose|trilogy|works?)\b"
)


def _author_stated(question: str, document: str) -> bool:
    """The document names a writer: an author word, "by <Name>", "<Name>'s novel", or a name beside
    the question's own words (:func:`_names_beside`)."""
    return _AUTHOR_WORDS.search(document) is not None or _names_beside(question, document)


# a sentence about buying ("Amazon's price was very low", "the buying experience with Amazon")
_BUYING = re.compile(
    r"\b(?:buy|buying|bought|purchas\w*|order|ordered|prices?|priced|sells?|sold|selling|shipping|shipped|"
    r"delivery|deals?|stock|stocks|stocked)\b",
    re.IGNORECASE,
)
# a name a sentence says something is bought at, from or through, or whose price it gives ("at
# Brindle's", "with Amazon", "Amazon's price")
_NAME_IN_SENTENCE = re.compile(
    r"\b(?:at|from|on|through|via|with)\s+(?:the\s+)?([A-Z][\w&.-]*(?: [A-Z][\w&.-]*)*)"
    r"|\b([A-Z][\w&.-]*(?: [A-Z][\w&.-]*)*)'s?\s+(?:prices?|deals?|sale|site|stock)\b"
)


def _seller_stated(pattern: re.Pattern[str]) -> _States:
    """The document states where to buy it where it writes ``pattern`` (a shop, a website, bought at
    or from somewhere) or names anything, other than the question's own words, in a sentence about
    buying: a shop by its name ("Amazon's price was very low"), with no list of shops (one fitted
    on reviews would name no shop of another domain, and take a passing "Netflix" for a seller)."""

    def states(question: str, document: str) -> bool:
        if pattern.search(document):
            return True
        asked = _asked(question)
        for sentence in split_sentences(document, glued=True):
            if not _BUYING.search(sentence):
                continue
            for found in _NAME_IN_SENTENCE.finditer(sentence):
                name = found.group(1) or found.group(2)
                if name != "I" and any(w.lower() not in asked for w in name.split()):
                    return True
        return False

    return states


# (what the question asks for, whether the document states it)
_KINDS: dict[str, tuple[re.Pattern[str], _States]] = {
    "price": (
        re.compile(
            r"\b(?:prices?|priced|costs?|fees?|fares?)\b"
            r"|\bhow much\b.{0,60}\b(?:pay|paid|spend|spent|charged?|charges)\b",
            re.IGNORECASE,
        ),
        _writes(
            re.compile(
                r"[$£€¥₹]\s?\d|\d\s?(?:[$£€¥₹]|dollars?|bucks|euros?|pounds?|cents?|pence|yen|rupees?|usd|eur|gbp)\b"
                r"|\b(?:free|dollars?|bucks|euros?|pounds?|cents?)\b",
                re.IGNORECASE,
            )
        ),
    ),
    "address": (
        re.compile(r"\baddress(?:es)?\b", re.IGNORECASE),
        # a numbered street ("333 O'Farrell Street"), a named one ("on Geary and Jones Streets", which
        # a reader may take for the address, or a room "not facing" a "... St"; not "Union Square", a
        # place), a French or German one, or a postcode
        _writes(
            re.compile(
                r"\b\d+[A-Za-z]?,?\s+(?:[A-Z][\w'.-]*\s+){0,3}(?:St|Street|Ave|Avenue|Rd|Road|Blvd|"
                r"Boulevard|Way|Lane|Ln|Drive|Dr|Place|Pl|Square|Sq|Court|Ct|Highway|Hwy)\b"
                r"|\b[A-Z][\w'.-]*\s+(?:(?:and|&)\s+[A-Z][\w'.-]*\s+)?(?:Streets?|St\.?|Avenues?|Ave\.?|Road|"
                r"Boulevard|Blvd)(?!\w)"
                r"|\b(?:rue|calle|strasse|straße)\b"
                r"|\b\d{5}(?:-\d{4})?\b|\b[A-Z]{1,2}\d{1,2}[A-Z]? \d[A-Z]{2}\b"
            )
        ),
    ),
    "year": (
        re.compile(
            r"\b(?:what|which) year\b|\bwhat date\b|\bwhen (?:was|were|did|is|will|does|do) \b.{0,80}?\b"
            r"(?:released?|published|founded|built|opened|introduced|launched|established|come out|"
            r"came out|born|died|written|filmed|made)\b"
            # "When did the hotel open?" (not "When is it open?": its hours)
            r"|\bwhen did \b.{0,80}?\b(?:open|build|release|publish|launch|introduce|establish)\b"
            r"|\bhow long has\b.{0,60}\bbeen (?:open|around|in business)\b",
            re.IGNORECASE,
        ),
        _writes(
            re.compile(
                r"\b(?:1[5-9]\d\d|20\d\d)s?\b|\b'\d\d\b|\b(?:" + "|".join(MONTHS.split()) + r")\b"
                r"|\b(?:ago|last (?:year|month|week)|this (?:year|month)|yesterday|today|recently)\b",
            )
        ),
    ),
    # where to buy it, of a document naming no shop, chain or website and saying nowhere that it was
    # bought at, from or "here" (a review on a shop's site), and naming nothing in a sentence about
    # buying (_seller_stated, with no list of shop names: one fitted on reviews would take a
    # "Netflix" named in passing for a seller and name no shop of another domain): "Where can I buy
    # Pure Bar?" of a review saying only that its writer will buy more, which the filter may read as
    # answerable (``absent_stores`` in docs/research/generation-history.md;
    # docs/research/generation-log.md, "Where to buy it, without a list of shop names")
    "store": (
        re.compile(
            r"\bwhere\b.{0,60}\b(?:buy|bought|sold|sells?|purchased?|available|order|ordered)\b"
            r"|\b(?:what|which) (?:stores?|shops?|retailers?)\b",
            re.IGNORECASE,
        ),
        _seller_stated(
            re.compile(
                r"\b(?i:stores?|shops?|supermarkets?|grocery|groceries|online|websites?|web ?site|"
                r"retailers?|"
                r"outlets?|malls?|farmer'?s'? markets?|\.com)\b"  # not "on the market"
                # bought at or from anywhere ("ordered it from the company": left to the filter), or
                # got or found on or in a named place ("picked it up in Napa")
                r"|\b(?i:bought|purchased|ordered)\b[^.!?]{0,40}?\b(?i:at|from|through|via|here)\b"
                r"|\b(?i:bought|buy|purchased?|ordered?|got|found|picked (?:it|them|these|this) up)\b"
                r"[^.!?]{0,40}?\b(?i:at|from|on|through|in) (?:(?i:the|a|an) )?[A-Z]"
            )
        ),
    ),
    # who wrote it, of a document naming no writer: no author or writer, nothing written "by"
    # someone, no "Collins's novel". A book review that never names its author cannot answer "Who
    # wrote The Road?", though the packaged filter may read it as answerable. A question about the
    # review's own writer is not one of these (the writer screen's).
    "author": (
        re.compile(
            r"^(?!.*\breview).*(?:\bwho\b.{0,40}\b(?:wrote|written|authored|penned|author|writer)\b"
            r"|\b(?:name of|what is|who is|who was) the (?:author|writer)\b|\bthe (?:author|writer) of\b)",
            re.IGNORECASE,
        ),
        _author_stated,
    ),
}

#: the kinds of detail :func:`absent_detail` knows
ABSENT_KINDS = tuple(_KINDS)


def absent_detail(question: str, document: str, kinds: Collection[str] = ABSENT_KINDS) -> str | None:
    """The kind of detail (one of ``kinds``, by default every one of :data:`ABSENT_KINDS`)
    ``question`` asks for that ``document`` states none of, or ``None``: "What is the price of the
    case?" of a review that names no amount of money is ``"price"``; of one that says "$129" it is
    ``None``, as is any question asking for something else."""
    for kind, (asks, states) in _KINDS.items():
        if kind in kinds and asks.search(question) and not states(question, document):
            return kind
    return None
