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
from dataclasses import dataclass, field

from scopeguard._sentences import split_run_on, split_sentences
from scopeguard.detection.read.text import STOPWORDS, content_stem_set, tokenize

__all__ = [
    "MAX_SENTENCE_WORDS",
    "MIN_SENTENCES",
    "DocumentView",
    "informative_sentences",
    "read_document",
    "unusable_reason",
]

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


def _ranked(pieces: list[str]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The sentences of 8 to 45 words among ``pieces``, and their indices, those with the most names
    and numbers first."""
    low, high = _SENTENCE_WORDS
    sentences = tuple(p for p in pieces if low <= len(p.split()) <= high)
    ranked = sorted(range(len(sentences)), key=lambda i: -len(_NAME_OR_NUMBER.findall(sentences[i][1:])))
    return sentences, tuple(ranked)


def _pick(sentences: tuple[str, ...], ranks: tuple[int, ...], k: int, skip: int) -> list[str]:
    return [sentences[i] for i in sorted(ranks[skip : skip + k])]


def informative_sentences(text: str, k: int, skip: int = 0, *, split_long: bool = False) -> list[str]:
    """The ``k`` sentences of ``text`` with the most names and numbers (of 8 to 45 words; with
    ``split_long``, as the offline modes ask, also the pieces of a longer one, :func:`_pieces`)
    after the ``skip`` with the most, in order."""
    return _pick(*_ranked(_pieces(text, split_long)), k, skip)


def _latin_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 0.0
    return sum(c.isascii() for c in letters) / len(letters)


def unusable_reason(text: str, *, split_long: bool = False) -> str | None:
    """Why the offline modes cannot use ``text``, or ``None`` when they can. With ``split_long``
    (as the offline modes read it) a sentence over :data:`MAX_SENTENCE_WORDS` words counts
    as its clauses: a review written without capitals is one "sentence" to the splitter."""
    return _unusable(text, _pieces(text, split_long))


def _unusable(text: str, pieces: list[str]) -> str | None:
    """:func:`unusable_reason` of ``text`` cut into ``pieces``."""
    if not text.strip():
        return "empty document"
    if _latin_share(text) < _MIN_LATIN_SHARE:
        return f"not English: {_latin_share(text):.0%} of its letters are Latin"
    words = tokenize(text)
    if len(words) >= _MIN_WORDS_TO_JUDGE:
        share = sum(w in STOPWORDS for w in words) / len(words)
        if share < _MIN_FUNCTION_SHARE:
            return f"not English: {share:.0%} English function words (English prose has 35-50%)"
    n = len(pieces)
    if n < MIN_SENTENCES:
        return f"too short: {n} sentence{'s' if n != 1 else ''} (the offline modes need {MIN_SENTENCES})"
    return None


@dataclass(frozen=True)
class DocumentView:
    """What the offline modes read of one document, read once (:meth:`of`): whether they can use it,
    its content words and the sentences they ask about; the subject's parts once it is named
    (:func:`~._subjects.about_subject` gives the view about it). The screens and the keeper read it
    for every candidate."""

    text: str
    #: the document's content words (stems)
    stems: frozenset[str]
    #: why the offline modes cannot use the document (:func:`unusable_reason`), or ``None``
    unusable: str | None = None
    #: the subject as asked about (a stand-in too: "the case"), and its kind
    subject: str = ""
    kind: str = ""
    #: the model's own name for the subject ("" when it is a stand-in): what another thing is
    #: told from
    own_subject: str = ""
    #: what the subject's kind is called ("film", "movie"): the subject's words, not details asked for
    kind_stems: frozenset[str] = frozenset()
    #: the subject's words and its kind's, counted as the document's for an unstated question
    subject_stems: frozenset[str] = frozenset()
    # the sentences that may be asked about (long ones cut at their clauses), and their ranks
    _sentences: tuple[str, ...] = field(default=(), repr=False)
    _ranks: tuple[int, ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, text: str) -> DocumentView:
        """:func:`read_document` of ``text``."""
        return read_document(text)

    def informative(self, k: int, skip: int = 0) -> list[str]:
        """:func:`informative_sentences` of the document (``split_long``), read once."""
        return _pick(self._sentences, self._ranks, k, skip)


def read_document(text: str) -> DocumentView:
    """``text`` read once as the offline modes read it (a sentence over :data:`MAX_SENTENCE_WORDS`
    words cut at its clause breaks): whether they can use it, its content words and the sentences
    they ask about."""
    pieces = _pieces(text, split_long=True)
    sentences, ranks = _ranked(pieces)
    unusable = _unusable(text, pieces)
    return DocumentView(text, frozenset(content_stem_set(text)), unusable, _sentences=sentences, _ranks=ranks)
