"""The one rule-based sentence splitter of the generator and the verifier.

A sentence ends at ``.``, ``!`` or ``?`` (optionally followed by closing quotes or brackets) before
whitespace and an upper-case letter, digit or opening quote; common abbreviations ("Dr.", "U.S.")
and single initials ("J. Smith") do not end one; a line break always does. With ``glued``, a
sentence also ends where its stop touches the next one's capital with no space between ("worth it.For
playing"), as in texts whose line breaks were lost (SubjQA's reviews): a lower-case word of at least
two letters before the stop, a capitalised word after it ("Crackle.com", "e.g.The", "U.S.Army" do not
end one).

The fast detector keeps its own splitter in :mod:`scopeguard.detection.read.text`: it is part of the
feature definition its shipped head was trained on (it also splits list items and cuts long
sentences into windows), so it changes only with a retrained head.
"""

from __future__ import annotations

import re

__all__ = ["sentence_spans", "split_run_on", "split_sentences"]

_ABBREVIATIONS = frozenset(
    ("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "no", "vs", "inc", "ltd", "co", "rs", "u.s")
)
_BOUNDARY_RE = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
# the same, or a stop glued to the next sentence: "it.For", "minutes.And" (not "e.g.The", "U.S.A")
_GLUED_BOUNDARY_RE = re.compile(
    r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])|(?<=[a-z][a-z][.!?])(?=[A-Z][a-z])"
)
_LINE_RE = re.compile(r"[^\n]+")


def sentence_spans(text: str, *, glued: bool = False) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the sentences of ``text``, stripped of whitespace."""
    boundary = _GLUED_BOUNDARY_RE if glued else _BOUNDARY_RE
    spans: list[tuple[int, int]] = []
    for line in _LINE_RE.finditer(text):
        offset, body = line.start(), line.group(0)
        start = 0
        for m in boundary.finditer(body):
            head = body[start : m.start()].rstrip()
            last_word = head.rsplit(maxsplit=1)[-1].rstrip(".").lower() if head else ""
            if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word):
                continue
            spans.append(_strip(text, offset + start, offset + m.end()))
            start = m.end()
        if body[start:].strip():
            spans.append(_strip(text, offset + start, offset + len(body)))
    return [s for s in spans if s[0] < s[1]]


def split_sentences(text: str, *, glued: bool = False) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`)."""
    return [text[a:b] for a, b in sentence_spans(text, glued=glued)]


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
