"""Every word list of the offline wing, each with what it is for and who reads it.

The rules that read them (the screens, the keeper, the subject's mending) live in their own
modules; a list changes here, once, and every rule that reads it sees the change. The regular
expressions of the rules hold the forms a rule matches ("the price of", "where can I buy") and stay
beside their rule. Why each list holds what it does, with the hand counts that led to it:
``docs/research/generation-history.md``.
"""

from __future__ import annotations

__all__ = [
    "CALENDAR_WORDS",
    "COMMON_NAMES",
    "COUNT_WORDS",
    "DETAIL_SYNONYM_WORDS",
    "DETAIL_WORDS",
    "FIXED_ARTEFACTS",
    "KIND_WORDS",
    "MONTHS",
    "SUBJECT_GLUE",
    "SUBJECT_KINDS",
]

# -- the subject (:mod:`._subjects`, :mod:`._replies`, :mod:`._out_of_scope`) --

#: what kind of thing a document's subject is: the ``kind`` of ``gen_document_subject``'s reply
#: (a schema enum), which picks the unstated questions' hints (``gen_unstated_question``);
#: ``"other"`` when none fits
SUBJECT_KINDS = ("product", "place", "book", "film", "person", "event", "other")

#: the words a question may call a subject of each kind by ("Who directed the film?" of a review of
#: "Failure To Launch", "What is the hotel's owner?" of the Marriott's), counted as the subject's
#: for mooring an unstated question and for its overlap; a subject of one of these kinds that its
#: document names late is a passing mention (:func:`~._subjects.named_late`)
KIND_WORDS = {"product": "product", "place": "place hotel", "book": "book novel", "film": "film movie"}

#: the words a subject may hold that its document need not write ("The Hotel", "Omni's hotel")
SUBJECT_GLUE = frozenset(["the", "a", "an", "of", "and", "in", "on", "for", "by", "at", "to", "s"])

# -- the details an unstated question asks for (:mod:`._keeper`'s overlap and copy rules) --

#: the details ``gen_unstated_question.j2`` hints at, and the words the packaged 1.5B asks them with
#: ("How far is the Sheraton from the city center?"): an unstated question asks for what its
#: document lacks, so these are not held against it by the overlap rule. A test holds the
#: template's hints to this list.
DETAIL_WORDS = (
    "price prices maker sold size made address owns far centre center city author publisher length "
    "year came opened director running time budget filmed date place amount reason cost"
)

#: the words a question asks the same detail with, read as the first (the key) by the copy rule, so
#: that "How far is the Omni from the centre?" copies "How far is the Omni from the city center?" and
#: "What does the Omni cost?" copies "What is the Omni's price?"
DETAIL_SYNONYM_WORDS = {
    "price": "cost costs fee fees priced prices",
    "far": "distance",
    "center": "centre",
    "sold": "buy bought sell sells purchase purchased available",
    "released": "launched introduced published",
}

# -- words that name nothing (:mod:`._natural`, :mod:`._absent`) --

#: capitalised words of the prompts' examples that are everyday words, not invented names: a
#: question holding one has not copied an example's name (:func:`~._natural.example_phrases`)
COMMON_NAMES = frozenset(
    [
        *("january", "february", "march", "april", "may", "june", "july", "august", "september"),
        *("october", "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday"),
        *("saturday", "sunday", "mayor", "town", "council", "institute", "valley", "athletic", "rovers"),
    ]
)

#: days and months: English capitalises them without naming anything ("Is it open on Sundays?"),
#: so the ``unwritten_name`` screen does not take them for names
CALENDAR_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may "  # noqa: SIM905
    "june july august september october november december".split()
)

#: the months as a document writes them: a document naming one states a date, so a question
#: asking for a year is answerable from it (:func:`~._absent.absent_detail`)
MONTHS = "January February March April May June July August September October November December"

#: counts and ordinals: two questions that differ only in one of these (or a number, an ordinal
#: such as "4th", a decade such as "1960s") are an enumeration (:func:`~._keeper.one_count_apart`)
COUNT_WORDS = frozenset(
    [
        *("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"),
        *("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    ]
)

#: phrases a small model adds to any question once an example showed them ("When did the council
#: meet for the second time?"); a question holding one its document does not say copied a prompt
FIXED_ARTEFACTS = ("for the second time", "for the first time")
