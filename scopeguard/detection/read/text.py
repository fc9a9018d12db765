"""Text helpers of the lexical and fast reads: tokens, stems, sentences, spans, limits.

Pure Python (``re`` only) so that the lexical baseline imports in milliseconds. Everything here
runs in time linear in the text, so that a long document costs what its length says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from scopeguard._sentences import sentence_spans
from scopeguard.errors import ConfigurationError, DocumentTooLongError

__all__ = [
    "STOPWORDS",
    "capitalised_spans",
    "check_length",
    "chunk_question",
    "content_runs",
    "content_stem_set",
    "content_stems",
    "coverage",
    "max_chars_option",
    "numbers",
    "sentence_windows",
    "stem",
    "tokenize",
]

# A small English function-word list plus the question words and generic verbs that every
# question uses ("what did the article say..."): they carry no information about the document.
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't could couldn't did didn't do does doesn't doing don't down during each
    either else ever few for from further get gets got had hadn't has hasn't have haven't having he her here
    hers herself him himself his how however i if in into is isn't it it's its itself just let's may me might
    more most much must mustn't my myself neither no nor not now of off on once one only or other ought our
    ours ourselves out over own per same shall she should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they this those through thus to too under until up upon us
    very was wasn't we were weren't what what's when where whether which while who whom whose why will with
    within without won't would wouldn't yet you your yours yourself yourselves
    according article based described describe describes detail details discussed document example given
    happen happened including kind kinds mentioned particular regarding role specific specifically text
    type types various way ways
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

_TOKEN_RE = re.compile(r"[A-Za-z0-9]+(?:['’.\-][A-Za-z0-9]+)*")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
_CAP_SPAN_RE = re.compile(r"\b[A-Z][\w'’\-]*(?:\s+(?:(?:of|the|de|and|&)\s+)?[A-Z][\w'’\-]*)*")
_SUFFIXES = (
    *("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied"),
    *("ers", "er", "es", "ed", "ly", "s"),
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (keeps inner apostrophes, hyphens and decimal points)."""
    return [t.lower().replace("’", "'") for t in _TOKEN_RE.findall(text)]


def stem(word: str) -> str:
    """A light suffix stripper: "rulings" -> "rul", "ruled" -> "rul"; short words are kept."""
    w = word.lower()
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) <= 4 or w.isdigit():
        return w
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            if suf == "ies" or suf == "ied":
                w += "y"
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]
    return w


def content_stems(text: str) -> list[str]:
    """Stems of the content words of ``text`` (stop-words removed), in order, with repeats."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS and not (len(t) == 1 and t.isalpha())]


def content_stem_set(text: str) -> set[str]:
    """``set(content_stems(text))``, stemming each distinct word once (a long document repeats
    its vocabulary, so this is several times faster and never holds a list of every token)."""
    words = {m.group(0).lower().replace("’", "'") for m in _TOKEN_RE.finditer(text)}
    return {stem(t) for t in words if t not in STOPWORDS and not (len(t) == 1 and t.isalpha())}


def max_chars_option(value: int | None) -> int | None:
    """Validate a detector's ``max_chars`` argument (a positive int, or None for no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"max_chars must be a positive integer or None, got {value!r}")
    return value


def check_length(texts: Iterable[str], max_chars: int | None, *, owner: str) -> int:
    """The total length of ``texts`` in characters; raises
    :class:`~scopeguard.errors.DocumentTooLongError` when it exceeds ``max_chars`` (None: no
    limit). ``owner`` names the class whose ``max_chars`` argument raises the limit."""
    total = sum(len(t) for t in texts)
    if max_chars is not None and total > max_chars:
        raise DocumentTooLongError(
            f"the documents total {total:,} characters, over the limit of {max_chars:,} characters "
            f"of {owner}; pass shorter passages (for example the retrieved chunks rather than whole "
            f"files), or raise the limit with {owner}(max_chars=...) (None: no limit)",
            n_tokens=total,
            limit=max_chars,
        )
    return total


def coverage(question_stems: Sequence[str], document_stems: Iterable[str]) -> float:
    """Share of the distinct question stems found among the document stems (1.0 for none)."""
    q = set(question_stems)
    if not q:
        return 1.0
    d = set(document_stems)
    return len(q & d) / len(q)


def numbers(text: str) -> set[str]:
    """The numbers in ``text``, normalised ("1,200" -> "1200")."""
    return {n.replace(",", "") for n in _NUMBER_RE.findall(text)}


def capitalised_spans(text: str) -> list[str]:
    """Capitalised multi-word spans: names, titles. A leading stop-word
    ("What", "The") is dropped."""
    out: list[str] = []
    for m in _CAP_SPAN_RE.finditer(text):
        words = m.group(0).split()
        if words and words[0].lower() in STOPWORDS:
            words = words[1:]
        span = " ".join(words)
        if span and not span.isdigit():
            out.append(span)
    return out


def sentence_windows(text: str, *, min_chars: int = 3, max_words: int = 60) -> list[str]:
    """The fast features' sentence windows of ``text``: its sentences by the features' rule
    (:func:`scopeguard._sentences.sentence_spans` with ``paragraphs``: punctuation + capital, blank
    lines, list items), whitespace collapsed, those under ``min_chars`` dropped.

    Very long sentences are cut into windows of ``max_words`` words so that an embedding of
    each one stays specific. (The prose sentence splitter is
    :func:`scopeguard.verification.split_sentences`.)
    """
    out: list[str] = []
    for a, b in sentence_spans(text, paragraphs=True):
        words = text[a:b].split()
        if len(" ".join(words)) >= min_chars:
            out.extend(" ".join(words[i : i + max_words]) for i in range(0, len(words), max_words))
    return out


def content_runs(text: str) -> list[list[tuple[str, int, int]]]:
    """Runs of consecutive content words of ``text`` as ``(word, start, end)``; stop-words and
    single letters end a run."""
    runs: list[list[tuple[str, int, int]]] = [[]]
    for m in _TOKEN_RE.finditer(text):
        tok = m.group(0)
        if tok.lower().replace("’", "'") in STOPWORDS or (len(tok) == 1 and tok.isalpha()):
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((tok, m.start(), m.end()))
    return [r for r in runs if r]


def chunk_question(question: str, *, size: int = 3) -> list[str]:
    """Noun-phrase-ish chunks of the question: runs of consecutive content words, cut into
    pieces of at most ``size`` words."""
    return [
        " ".join(w for w, _, _ in run[i : i + size])
        for run in content_runs(question)
        for i in range(0, len(run), size)
    ]
