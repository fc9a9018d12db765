"""Documents the offline modes cannot use, found before any LLM call, each with a reason.

The small packaged models write English questions from a few sentences of English prose. An empty
document, one of a single sentence (nothing to perturb but its own claim), and one that is not
English (judged by its script and by the share of English function words) are refused with a
reason the run records; a document longer than the model's context is refused when the model says
so (:class:`~scopeguard.errors.DocumentTooLongError`, caught by the caller).
"""

from __future__ import annotations

from scopeguard._sentences import split_run_on, split_sentences
from scopeguard.detection.read.text import STOPWORDS, tokenize

__all__ = ["MAX_SENTENCE_WORDS", "MIN_SENTENCES", "unusable_reason"]

MIN_SENTENCES = 2
# a "sentence" longer than this is too long to ask about; with split_long, it is cut into clauses
MAX_SENTENCE_WORDS = 45
# English prose has 35-50% function words (of this list); French or German prose shares a few
# of them ("in", "an", "so") and stays well under this.
_MIN_FUNCTION_SHARE = 0.15
_MIN_LATIN_SHARE = 0.8
_MIN_WORDS_TO_JUDGE = 20


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
    n = sum(
        len(split_run_on(s)) if split_long and len(s.split()) > MAX_SENTENCE_WORDS else 1
        for s in split_sentences(text, glued=True)
    )
    if n < MIN_SENTENCES:
        return f"too short: {n} sentence{'s' if n != 1 else ''} (the offline modes need {MIN_SENTENCES})"
    return None
