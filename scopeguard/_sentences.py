"""The one rule-based sentence splitter: the generator's, the verifier's and the detectors' reads.

A sentence ends at ``.``, ``!`` or ``?`` (optionally followed by closing quotes or brackets) before
whitespace and an upper-case letter, digit or opening quote; common abbreviations ("Dr.", "U.S.")
and single initials ("J. Smith") do not end one; a line break always does. With ``glued``, a
sentence also ends where its stop touches the next one's capital with no space between ("worth it.For
playing"), as in texts whose line breaks were lost (SubjQA's reviews): a lower-case word of at least
two letters before the stop, a capitalised word after it ("Crackle.com", "e.g.The", "U.S.Army" do not
end one).

With ``paragraphs``, the rule of the fast detector's features (its shipped head was trained on it, so
it changes only with a retrained head; :func:`scopeguard.detection.read.text.sentence_windows` cuts
these sentences into windows): a line break ends a sentence only at a blank line or before a list
item ("-", "*", "•"), closing quotes and brackets are left out of the sentence before them, and only
capitalised titles ("Dr.", "Gen.", "Corp.", "vs.") and single capitals ("J.", "S.F.") do not end one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scopeguard.errors import ConfigurationError

__all__ = ["sentence_spans", "split_run_on", "split_sentences"]

_ABBREVIATIONS = frozenset(
    ("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "no", "vs", "inc", "ltd", "co", "rs", "u.s")
)
_BOUNDARY = r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])"
# the same, or a stop glued to the next sentence: "it.For", "minutes.And" (not "e.g.The", "U.S.A")
_GLUED = r"|(?<=[a-z][a-z][.!?])(?=[A-Z][a-z])"
# the fast features': the same, a blank line, or a line break before a list item
_PARAGRAPH = r"|\n\s*\n|\n(?=\s*[-*•])"
_TITLE_RE = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|Prof|Gen|Gov|Sen|Rep|No|Inc|Co|Corp|Ltd)|\b[A-Z])\.$"
)
_TITLE_TAIL = 8  # a match of _TITLE_RE is at most 5 characters ("Corp."): only the tail is searched
_LINE_RE = re.compile(r"[^\n]+")


@dataclass(frozen=True)
class _Rule:
    boundary: re.Pattern[str]
    per_line: bool  # a line break always ends a sentence
    closers: bool  # closing quotes and brackets after a stop belong to its sentence
    titles: bool  # _TITLE_RE decides what does not end a sentence, not _ABBREVIATIONS


_PROSE = _Rule(re.compile(_BOUNDARY), per_line=True, closers=True, titles=False)
_PROSE_GLUED = _Rule(re.compile(_BOUNDARY + _GLUED), per_line=True, closers=True, titles=False)
_FEATURES = _Rule(re.compile(_BOUNDARY + _PARAGRAPH), per_line=False, closers=False, titles=True)


def _no_end(rule: _Rule, body: str, start: int, end: int) -> bool:
    """Whether the text of ``body`` before ``end`` (a sentence from ``start``) ends with an
    abbreviation or an initial, which does not end a sentence. Looks only at the last word, so
    that a long run of initials stays linear."""
    while end > start and body[end - 1].isspace():  # a paragraph's break follows its spaces
        end -= 1
    if rule.titles:
        return _TITLE_RE.search(body, max(start, end - _TITLE_TAIL), end) is not None
    word_start = end
    while word_start > start and not body[word_start - 1].isspace():
        word_start -= 1
    word = body[word_start:end].rstrip(".").lower()
    return word in _ABBREVIATIONS or (len(word) == 1 and "a" <= word <= "z")


def sentence_spans(text: str, *, glued: bool = False, paragraphs: bool = False) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the sentences of ``text``, stripped of whitespace."""
    if glued and paragraphs:
        raise ConfigurationError("sentence_spans: glued and paragraphs are two rules; choose one")
    rule = _FEATURES if paragraphs else _PROSE_GLUED if glued else _PROSE
    units = ((m.start(), m.group(0)) for m in _LINE_RE.finditer(text)) if rule.per_line else [(0, text)]
    spans: list[tuple[int, int]] = []
    for offset, body in units:
        start = 0
        for m in rule.boundary.finditer(body):
            if _no_end(rule, body, start, m.start()):
                continue
            spans.append(_strip(text, offset + start, offset + (m.end() if rule.closers else m.start())))
            start = m.end()
        if body[start:].strip():
            spans.append(_strip(text, offset + start, offset + len(body)))
    return [s for s in spans if s[0] < s[1]]


def split_sentences(text: str, *, glued: bool = False, paragraphs: bool = False) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`)."""
    return [text[a:b] for a, b in sentence_spans(text, glued=glued, paragraphs=paragraphs)]


# where a run-on "sentence" is cut (split_run_on): an ellipsis ("options..these",
# "money....Sennheiser"), a dash, a semicolon, a stop glued to a capital after a closing bracket or
# before a word in capitals ("caffeine!).Also", "these!UPDATE 2008"), and a stop before a lower-case
# word ("really like the crisp sound. pretty big size", "excellent buy!you get"), as reviewers who
# write without capitals or line breaks run their sentences together
_RUN_ON_BREAK = re.compile(
    r"\.{2,}\s*|\u2026\s*|\s*--+\s*|;\s+|(?<=[a-z)][.!?])(?=[A-Z])|(?<=[a-z][.!?])\s+(?=[a-z])|(?<=[a-z][!?])(?=[a-z])"
)


def split_run_on(sentence: str) -> list[str]:
    """The clauses of a run-on ``sentence`` (cut at :data:`_RUN_ON_BREAK`), stripped, none empty.

    Meant for a "sentence" too long to be one (the offline generator's, over 45 words): a stop
    before a lower-case word also ends a clause, which in well-written prose it does not ("e.g. the").
    """
    return [p.strip() for p in _RUN_ON_BREAK.split(sentence) if p.strip()]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
