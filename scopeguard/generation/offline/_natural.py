"""Screens for generated questions no person would send to a system reading documents.

:func:`unnatural` gives the first reason found: a phrase copied from a prompt's example
(:func:`copied_phrase`), a question put to the document's writer ("What did you think of ...?",
"Have you noticed ...?": followed up from a review, a small model talks to its author), two
questions in one ("What other keyboards are there, and what are their prices?", which the ELOQ
prompt itself forbids), or the name of something already named ("What is the name of DirecTV?").
Each was common among generated questions read by hand (``docs/research/generation-log.md``,
"Natural out-of-scope questions"), as was, in one reply, an enumeration (:func:`~._keeper.enumerations`: "the
person's second / third / fourth thought").

A small model shown one worked example copies its phrases ("for the second time", "instead of").
Every string a generation template sets (its examples,
:func:`~scopeguard.prompts.template_examples`) is cut into word trigrams; a question holding one of
them that its document and source question do not hold, with a content word they lack, or an
invented name from an example, copied the prompt and is dropped with the phrase as the reason.
Trigrams with fewer than two content words ("what is the", "paid for the") are everyday English,
not a copy; so is "the council met" about a document on a council.

Beside them, the checks every candidate of the offline modes meets: :func:`standalone` cuts a
reference to the sentence it was written from and mends slips no person makes,
:func:`degenerate` and :func:`unmoored` say why a reply is no usable question, and
:func:`about_writer`, :func:`two_things` and :func:`odd_detail` why it is not one a reader asks.
The screens of :mod:`._screens` call them; what a question's subject is, is :mod:`._subjects`'s,
and whether it copies one kept, the keeper's (:mod:`._keeper`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache

from scopeguard.detection.read.text import STOPWORDS, content_stems, stem
from scopeguard.generation.offline._subjects import QUESTION_NAME
from scopeguard.generation.offline._vocabulary import (
    CALENDAR_WORDS,
    COMMON_NAMES,
    FIXED_ARTEFACTS,
)
from scopeguard.prompts import available_templates, template_examples

__all__ = [
    "ExamplePhrases",
    "about_writer",
    "asks_name",
    "asks_writer_name",
    "centre_as_written",
    "copied_phrase",
    "degenerate",
    "example_phrases",
    "odd_detail",
    "standalone",
    "two_things",
    "unmoored",
    "unnatural",
    "unwritten_name",
]

_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
_NAME = re.compile(r"(?<![.?!:\"] )(?<!^)\b[A-Z][a-z]+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _trigrams(words: list[str]) -> set[tuple[str, str, str]]:
    return {(a, b, c) for a, b, c in zip(words, words[1:], words[2:], strict=False)}


@dataclass(frozen=True)
class ExamplePhrases:
    """What a question must not copy: word trigrams with two content words, and invented names."""

    trigrams: frozenset[tuple[str, str, str]]
    names: frozenset[str]


@lru_cache(maxsize=8)
def example_phrases(templates: tuple[str, ...] | None = None) -> ExamplePhrases:
    """The phrases of ``templates``' examples (default: every ``gen_*`` template)."""
    names = templates
    if names is None:
        names = tuple(t for t in available_templates() if t.startswith("gen_"))
    trigrams: set[tuple[str, str, str]] = set()
    found: set[str] = set()
    for name in names:
        for text in template_examples(name):
            trigrams |= {t for t in _trigrams(_words(text)) if sum(w not in STOPWORDS for w in t) >= 2}
            found |= {n.lower() for n in _NAME.findall(text)} - COMMON_NAMES
    return ExamplePhrases(frozenset(trigrams), frozenset(found))


def copied_phrase(question: str, context: str, phrases: ExamplePhrases | None = None) -> str | None:
    """Why ``question`` copied a prompt example (``'copies "for the second time" ...'``), or ``None``.

    ``context``: the text the question may take words from (its document and the question it was
    rewritten from). ``phrases``: default :func:`example_phrases` of every generation template.
    """
    phrases = phrases or example_phrases()
    allowed = _words(context)
    words = _words(question)
    own, known = _trigrams(allowed), set(allowed)
    text = " ".join(words)
    for artefact in FIXED_ARTEFACTS:
        if f" {artefact} " in f" {text} " and artefact not in " ".join(allowed):
            return f'holds "{artefact}", a phrase small models add to any question'
    for trigram in zip(words, words[1:], words[2:], strict=False):
        new = any(w not in known and w not in STOPWORDS for w in trigram)
        if new and trigram in phrases.trigrams and trigram not in own:
            return f'copies "{" ".join(trigram)}" from a prompt example'
    names = sorted({w for w in words if w in phrases.names} - known)
    if names:
        return f"copies the name {names[0]!r} from a prompt example"
    return None


_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b", re.IGNORECASE)
_TWO_QUESTIONS = re.compile(
    r"(?:,\s*(?:and|or)\s+|\s(?:and|or)\s+(?:also\s+)?)(?:what|how|who|whom|when|where|why|which|is|are|"
    r"was|were|do|does|did|can|could|will|would|has|have|had)\b",
    re.IGNORECASE,
)


# "What is the name of DirecTV?": the name of something that has one (a capitalised word after
# "name of", the question's first word aside)
_NAME_OF_NAMED = re.compile(r"\bnames? of (?:the )?[A-Z]")


def unnatural(question: str, context: str, phrases: ExamplePhrases | None = None) -> str | None:
    """Why ``question`` is not one a person would send about its document, or ``None``
    (``context``: its document and the question it was made from; see the module docstring)."""
    copied = copied_phrase(question, context, phrases)
    if copied is not None:
        return copied
    if _SECOND_PERSON.search(question):
        return "asks the document's writer (you), not the document"
    if _TWO_QUESTIONS.search(question):
        return "asks two questions at once"
    if _NAME_OF_NAMED.search(question):
        return "asks the name of something already named"
    return None


# the text's writer named as a third person: a review's "I" as the packaged 1.5B rewrites it ("What
# was the person's name?", "Why did the speaker tell the person about the HDMI cable?"); a reader asks
# about what a review is about, not about its writer. Someone else is not ("the person who created
# the Chromecast"), nor is a narrator (a novel's)
_THE_WRITER = re.compile(r"\bthe (?:person|speaker)\b(?!\s+(?:who|whom|whose|that)\b)", re.IGNORECASE)
# in scope, the name of "the person" (a review's writer, whom it never names), which its review
# does not answer ("What is the name of the person who is making muffins?")
_WRITER_NAME = re.compile(r"\bname of the (?:person|people)\b", re.IGNORECASE)
# two things joined by "and" where one detail of one thing was asked for ("What is the price of the
# EOS 350D and 400D?", "the address of the bar and restaurant": the unstated prompt asks for one
# detail of one thing); not a name's "and" ("Barnes and Noble", "Lochan and Maya")
_JOINED = re.compile(r"\b([\w'-]+)\s+(?:and|&)\s+([\w'-]+)")


def about_writer(question: str) -> str | None:
    """Why ``question`` is about its document's writer, named as a third person, or ``None``."""
    if _THE_WRITER.search(question):
        return "asks about the document's writer (the person), not the document"
    return None


def asks_writer_name(question: str) -> str | None:
    """Why ``question`` (in scope) asks for a name a review never gives, its writer's, or ``None``."""
    if _WRITER_NAME.search(question):
        return "asks the name of the person (the writer), which the document does not give"
    return None


def two_things(question: str, document: str = "") -> str | None:
    """Why ``question`` asks about two things joined by "and" at once, or ``None`` (a name joined by
    "and", both words capitalised and without digits, is one thing; "the X10 and X20" are two; so is
    what ``document`` writes joined so, a title: "Harry Potter and the Sorcerer's Stone")."""
    for first, second in _JOINED.findall(question):
        name = first[:1].isupper() and second[:1].isupper() and not re.search(r"\d", first + second)
        written = document and re.search(
            rf"(?<![\w'-]){re.escape(first)}\s+(?:and|&)\s+{re.escape(second)}(?![\w'-])",
            document,
            re.IGNORECASE,
        )
        if not name and not written:
            return f"asks about two things at once ({first} and {second})"
    return None


# "How far is Hotel Monaco from the center of Paris?" of a San Francisco hotel: the place hints ask
# how far it is from the centre, and the 1.5B names a city the review does not: most often a wrong
# one (a false premise), else one the review calls otherwise ("San Francisco" of a review writing
# "SF"); ``centre_as_written`` in docs/research/generation-history.md
_CENTRE_OF = re.compile(r"\bthe (cent(?:er|re)) of ((?:[A-Z][\w'.-]*)(?: [A-Z][\w'.-]*)*)")


def centre_as_written(question: str, document: str) -> str:
    """``question`` with "the centre of" a city ``document`` does not name made "the city centre"
    (the model's guess at where the place is: "... from the center of Paris?" of a San Francisco
    hotel -> "... from the city center?"); a city the document names stays."""

    def mend(found: re.Match[str]) -> str:
        return found[0] if found[2].lower() in document.lower() else f"the city {found[1]}"

    return _CENTRE_OF.sub(mend, question)


# "When is the beef jerky available?" of a review of jerky its writer has eaten, "When does the
# hotel open?" of a hotel's, prompted by the hints' "where it is sold" and "the year it opened": no
# reader of a review asks them (what it reviews was bought, a hotel reviewed is open; ``odd_details``
# in docs/research/generation-history.md); "How long has the hotel been open?" is a year, and stays
_ODD_DETAIL = re.compile(
    r"^when (?:is|are) \b.{0,80}\bavailable\b"
    r"|^(?:when|what time) (?:does|do) \b.{0,80}\bopen\s*\?$"
    r"|^when (?:is|are) \b.{0,80}\bopen\s*\?$"
    r"|\bopening (?:hours|times)\b",
    re.IGNORECASE,
)


def odd_detail(question: str) -> str | None:
    """Why ``question`` asks a detail no reader of a review asks (when something it reviews "is
    available", when a place "opens" or its opening hours), or ``None``."""
    if _ODD_DETAIL.search(question):
        return "asks when it is available or open (no detail a reader of the document would ask)"
    return None


# "What is the name of the hotel's owner?", "What is the author's name?", "What is it called?"
_ASKS_NAME = re.compile(r"\bnames? of\b|'s names?\b|\bcalled\?$", re.IGNORECASE)


def asks_name(question: str) -> str | None:
    """Why ``question``, written as out of scope, asks for a name, or ``None``. Its document names
    something of the kind elsewhere, or the question invents the thing named ("What is the name of
    the kennel?" of a vet's page whose boarding wing is the centre's own, "What is the name of the
    law?" of one naming no law; read by hand in docs/research/generation-log.md, "A screen for
    questions asking a name")."""
    if _ASKS_NAME.search(question):
        return "asks for a name (the document names it elsewhere, or nothing of the kind)"
    return None


def unwritten_name(question: str, document: str, stems: AbstractSet[str]) -> str | None:
    """Why ``question`` names something ``document`` never writes (``stems``: its content stems,
    and any others counted as its), or ``None``; a word found inside another ("recommendBack To
    Nature", a review's glued words) is written, and so are days and months. An out-of-scope
    question about a thing the document names asks what it leaves unsaid; one that brings in a name
    of its own is the writer's invention: "... in the United States?" of two passages on
    economics, "... who hid Daily Kos from the French?", "What is Jalen Hurts' current position in
    the NFL?" (replayed on hand-labelled questions in docs/research/generation-log.md, "A screen
    for names the document never writes")."""
    lowered = None
    for name in QUESTION_NAME.finditer(question):
        for written in name.group(0).split():
            word = re.sub(r"['\u2019]s?$", "", written).lower()
            calendar = word in CALENDAR_WORDS or (word.endswith("s") and word[:-1] in CALENDAR_WORDS)
            if len(word) < 2 or word in STOPWORDS or calendar or stem(word) in stems:
                continue
            lowered = document.lower() if lowered is None else lowered
            if word not in lowered:
                return f"names what its document never writes ({written})"
    return None


_MIN_WORDS = 5
_NAME_AFTER_FIRST = re.compile(r"\s[A-Z][a-z]")
# "... mentioned in the sentence?": shown one sentence, the model refers to it; a user never does
_SHOWN_UNIT = re.compile(
    r",?\s+(?:(?:that|which) (?:is|are) )?(?:(?:mentioned|stated|described|listed|given|named) )?"
    r"(?:in|by|from) (?:the|this) (?:sentence|text|passage|statement)\s*(?=\?$)",
    re.IGNORECASE,
)


# what standalone() leaves: "What players are mentioned in the (other) sentence?" has no sense apart
# from the prompt ("sentence" only: a user may ask about "this text" or "the passage of a bill").
# Out of scope: "What type of movie does this sentence describe?", "What is the main point of the
# sentence about ...?", "... the app that the sentence is referring to?"; in scope: "What does the
# sentence 'I almost gave it four stars' mean?", "What does the sentence '...' answer?", "... the
# novel that the sentence is based on?", "What is the main point of the sentence?"
_SHOWN_SENTENCE = re.compile(
    r"\b(?:in|from)\s+(?:(?:the|this|that)\s+)?(?:(?:other|previous|next|following|given|above|same)\s+)?"
    r"sentences?\b|\bthis sentence\b|\b(?:main )?(?:point|meaning|gist|purpose) of the sentence\b"
    r"|\bthe sentence\s+(?:is\s+)?(?:about|referring|refers|describ(?:es|ing|e)|say(?:s|ing)?|means?|based)\b"
    r"|\bthe sentence\s+[\"'\u201c\u2018].*[\"'\u201d\u2019]\s*"
    r"(?:means?|says?|describes?|refers?|answers?)\b",
    re.IGNORECASE,
)
_REFERS = "refers to the sentence it was written from"


# slips of the packaged 1.5B a person would not make: "What is the director of the film?" (a
# person: who; so "What is the owner of ...?"), "Where is the location of the BART?" (where is it)
_WHAT_PERSON = re.compile(
    r"^What (is|was) the (director|author|writer|screenwriter|actor|actress|narrator|illustrator|"
    r"composer|producer|translator|owner|founder|creator|designer|inventor|manager) (?=of\b)",
    re.IGNORECASE,
)
_WHERE_LOCATION = re.compile(r"^Where (is|was) the location of\s+", re.IGNORECASE)
# a subject the model named "The book" copied into the middle of a question ("When was The book
# published?"): an article before a word in lower case is no name's
_STRAY_THE = re.compile(r"(?<=\w )The (?=[a-z])")


def standalone(question: str) -> str:
    """``question`` without a reference to the sentence it was written from ("What are the largest
    predatory creatures mentioned in the sentence?" -> "What are the largest predatory creatures?")
    and with a slip a person would not make mended ("What is the director of ...?" -> "Who is the
    director of ...?", "Where is the location of ...?" -> "Where is ...?", "When was The book
    published?" -> "... the book ...")."""
    question = _WHAT_PERSON.sub(lambda m: f"Who {m[1]} the {m[2]} ", question.strip())
    question = _WHERE_LOCATION.sub(lambda m: f"Where {m[1]} ", question)
    question = _STRAY_THE.sub("the ", question)
    cut = _SHOWN_UNIT.sub("", question).strip()
    # "Which rivers are listed in this text?" needs its verb: left as it is
    return question if cut.rstrip("?").split()[-1:] in (["is"], ["are"], ["was"], ["were"]) else cut


def degenerate(question: str) -> str | None:
    """Why ``question`` is not a usable question (it refers to the sentence shown to its writer, is too
    short, or says a run of words twice), or ``None``.

    Small models' edits sometimes repeat the subject ("Why was Ann Lee not Ann Lee?"): such a
    question is unanswerable but useless as a test.
    """
    if _SHOWN_SENTENCE.search(question):
        return _REFERS
    tokens = question.lower().rstrip("?").split()
    # one word fewer when it names something: "What is Sheraton's address?" is long enough, "When
    # was it published?" (naming nothing) is not
    named = len(tokens) == _MIN_WORDS - 1 and _NAME_AFTER_FIRST.search(question) is not None
    if len(tokens) < _MIN_WORDS and not named:
        return f"too short ({len(tokens)} words)"
    stems = content_stems(question)
    pairs = list(itertools.pairwise(stems))
    if len(set(pairs)) < len(pairs) or any(a == b for a, b in pairs):
        return "repeats its own words"
    return None


def unmoored(question: str, sentence: str) -> str | None:
    """Why an in-scope candidate is no question about ``sentence``, the one its writer was shown, or
    ``None``: it refers to "the sentence" ("What players are mentioned in the sentence?"), or shares
    no content word with it ("What are the people, places, and things?": the prompt's words)."""
    if _SHOWN_SENTENCE.search(question):
        return _REFERS
    if not set(content_stems(question)) & set(content_stems(sentence)):
        return "shares no word with its sentence"
    return None
