"""How the offline modes read a document: whether they can use it, and the sentences they ask about.

The small packaged models write English questions from a few sentences of English prose. An empty
document, one of a single sentence (nothing to perturb but its own claim), and one that is not
English (judged by its script and by the share of English function words) are refused with a
reason the run records (:func:`unusable_reason`), before any LLM call; a document longer than the
model's context is refused when the model says so
(:class:`~scopeguard.errors.DocumentTooLongError`, caught by the caller).

The sentences asked about are those with the most names and numbers
(:func:`informative_sentences`): the one sentence splitter's (:mod:`scopeguard._sentences`), a
"sentence" over :data:`MAX_SENTENCE_WORDS` words cut at its clause breaks.
"""

from __future__ import annotations

import re

from scopeguard._sentences import split_run_on, split_sentences
from scopeguard.detection.read.text import STOPWORDS, tokenize

__all__ = ["MAX_SENTENCE_WORDS", "MIN_SENTENCES", "informative_sentences", "unusable_reason"]

MIN_SENTENCES = 2
# a "sentence" longer than this is too long to ask about; with split_long, it is cut into clauses
MAX_SENTENCE_WORDS = 45
# English prose has 35-50% function words (of this list); French or German prose shares a few
# of them ("in", "an", "so") and stays well under this.
_MIN_FUNCTION_SHARE = 0.15
_MIN_LATIN_SHARE = 0.8
_MIN_WORDS_TO_JUDGE = 20


_SENTENCE_WORDS = (8, MAX_SENTENCE_WORDS)
_NAME_OR_NUMBER = re.compile(r"\b[A-Z][a-z]+|\d+")


def _pieces(text: str, split_long: bool) -> list[str]:
    """The sentences of ``text``; with ``split_long``, one over :data:`MAX_SENTENCE_WORDS` words is
    cut into its clauses (:func:`~scopeguard._sentences.split_run_on`): a text whose sentences run
    together, as two reviews glued without breaks or one written without capitals, is otherwise one
    "sentence" to the splitter."""
    out: list[str] = []
    for sentence in split_sentences(text, glued=True):
        long = split_long and len(sentence.split()) > MAX_SENTENCE_WORDS
        out += split_run_on(sentence) if long else [sentence]
    return out


def informative_sentences(text: str, k: int, skip: int = 0, *, split_long: bool = False) -> list[str]:
    """The ``k`` sentences of ``text`` with the most names and numbers (of 8 to 45 words; with
    ``split_long``, as the offline modes ask, also the pieces of a longer one, :func:`_pieces`)
    after the ``skip`` with the most, in order."""
    low, high = _SENTENCE_WORDS
    sentences = [p for p in _pieces(text, split_long) if low <= len(p.split()) <= high]
    ranked = sorted(range(len(sentences)), key=lambda i: -len(_NAME_OR_NUMBER.findall(sentences[i][1:])))
    return [sentences[i] for i in sorted(ranked[skip : skip + k])]


def _latin_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(c.isascii() for c in letters) / len(letters)


def unusable_reason(text: str, *, split_long: bool = False) -> str | None:
    """Why the offline modes cannot use ``text``, or ``None`` when they can. With ``split_long``
    (as the offline modes read it) a sentence over :data:`MAX_SENTENCE_WORDS` words counts
    as its clauses: a review written without capitals is one "sentence" to the splitter."""
    if not text.strip():
        return "empty document"
    if _latin_share(text) < _MIN_LATIN_SHARE:
        return f"not English: {_latin_share(text):.0%} of its letters are Latin"
    words = tokenize(text)
    if len(words) >= _MIN_WORDS_TO_JUDGE:
        share = sum(w in STOPWORDS for w in words) / len(words)
        if share < _MIN_FUNCTION_SHARE:
            return f"not English: {share:.0%} English function words (English prose has 35-50%)"
    n = len(_pieces(text, split_long))
    if n < MIN_SENTENCES:
        return f"too short: {n} sentence{'s' if n != 1 else ''} (the offline modes need {MIN_SENTENCES})"
    return None
