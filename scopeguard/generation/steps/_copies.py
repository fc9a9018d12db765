"""The words of a question as the copy rule and the overlap rule read them.

A candidate with the content words of one kept, or asking the same detail of the same thing in
other words ("How much does it cost?" after "What is the price?"), is a copy
(:func:`copy_stems`, :func:`synonyms_as_one`); an out-of-scope candidate needs a share of its
content words in the document, the details it asks for aside (:func:`overlap`, :data:`DETAIL_STEMS`).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet

from scopeguard.detection.read.text import content_stems, stem

__all__ = ["DETAIL_STEMS", "DETAIL_SYNONYMS", "DETAIL_WORDS", "copy_stems", "overlap", "synonyms_as_one"]

# The details gen_unstated_question.j2 hints at, and the words the packaged 1.5B asks them with
# ("How far is the Sheraton from the city center?"): an unstated question asks for what its
# document lacks, so these are not held against it by the overlap rule (overlap's ``skip``;
# the keeper's). A test holds the template's hints to this list.
DETAIL_WORDS = (
    "price prices maker sold size made address owns far centre center city author publisher length "
    "year came opened director running time budget filmed date place amount reason cost"
)
DETAIL_STEMS = frozenset(content_stems(DETAIL_WORDS))

# Words a question asks the same detail with, read as one by the copy rule
# (:func:`synonyms_as_one`), so that "How far is the Omni from the centre?" is a copy of "How far is
# the Omni from the city center?" and "What does the Omni cost?" of "What is the Omni's price?".
_SYNONYMS = {
    "price": "cost costs fee fees priced prices",
    "far": "distance",
    "center": "centre",
    "sold": "buy bought sell sells purchase purchased available",
    "released": "launched introduced published",
}
DETAIL_SYNONYMS = {
    stem(word): stem(canon)
    for canon, words in _SYNONYMS.items()
    for word in words.split()
    if stem(word) != stem(canon)
}


def _one_form(stem_: str) -> str:
    # the light stemmer cuts "-es" and makes "-ies" "-y" but leaves "-e" and "-ie": "drives" -> "driv"
    # and "drive" -> "drive", "movies" -> "movy" and "movie" -> "movie" (without this, "What is the
    # price of Seagate drives?" would be kept beside "... of this drive?")
    stem_ = stem_[:-1] if stem_.endswith("e") else stem_
    return stem_[:-1] + "i" if stem_.endswith("y") else stem_


# agent nouns the stemmer reads as their verb ("publisher" as "published", which the copy rule reads as
# "released"): "What was the publisher of The Road?" and "When was The Road published?" ask two
# details (read as one word, the publisher question is dropped as a copy of the year question and
# a short book review loses an out-of-scope question)
_AGENT_NOUNS = re.compile(r"\b(publisher|founder|owner)s?\b", re.IGNORECASE)


def copy_stems(question: str) -> frozenset[str]:
    """``question``'s content words (stems) as the copy rule compares them: an agent noun
    ("publisher", "founder", "owner") is a word of its own, not its verb's stem."""
    agents = {f"{m[1].lower()}:who" for m in _AGENT_NOUNS.finditer(question)}
    return frozenset(content_stems(_AGENT_NOUNS.sub(" ", question))) | agents


def synonyms_as_one(stems: frozenset[str]) -> frozenset[str]:
    """``stems`` with each synonym of a detail (:data:`DETAIL_SYNONYMS`) read as its first word, and
    a word's forms the stemmer leaves apart ("drive", "drives") as one."""
    return frozenset(_one_form(DETAIL_SYNONYMS.get(s, s)) for s in stems)


def overlap(question: str, document_stems: AbstractSet[str], skip: AbstractSet[str] = frozenset()) -> float:
    """The share of ``question``'s content words (stems) that occur in the document, not counting
    those in ``skip`` (the details a question is meant to ask for) unless it has no other."""
    stems = content_stems(question)
    rest = [s for s in stems if s not in skip] or stems
    return sum(s in document_stems for s in rest) / len(rest) if rest else 0.0
