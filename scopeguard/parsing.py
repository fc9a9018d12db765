"""Parse the final verdict out of a free-text LLM reply.

The ELOQ prompts end with "End your response with 'The answer is: Yes or No.'". Small models
decorate that line (``**The answer is: Yes.**``, ``The answer is "No"``, ``the answer is: no,
because...``), repeat the instruction verbatim (``The answer is: Yes or No.``, or a whole
instruction such as ``...you should conclude with 'The answer is: No.' even if...``) or never give
it. :func:`parse_final_answer` takes the LAST unambiguous "The answer is: X" that is not part of an
echoed instruction and returns ``X`` lower-cased, or ``None`` when there is none: a reply that
cannot be parsed is never a label.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["parse_final_answer", "split_rationale"]

# "the answer is", "final answer is", "answer:"; then separators and markdown/quote decoration.
_LEAD = r"(?:\bthe\s+(?:final\s+)?answer\s+is|\bfinal\s+answer\s*:|\banswer\s*:)"
_DECOR = r"[\s:：\-–—*_\"'`“”‘’\[\(]*"
# An instruction echoed back quotes the verdict line after a verb of concluding: "conclude with
# 'The answer is: No.'", "end your response with 'The answer is: Yes or No.'", or the second of two
# quoted alternatives ("... 'The answer is: Yes.' or 'The answer is: No.'"). Such a match is the
# prompt's text, not the model's verdict.
_ECHO = re.compile(
    r"(?:\b(?:conclude|end|finish|respond|reply|answer|start|begin)\w*\s+(?:\w+\s+){0,3}with"
    r"|[\"'`”’]\.?\s+or)\s*[\"'`“‘]?\s*$",
    re.IGNORECASE,
)


@lru_cache(maxsize=32)
def _pattern(choices: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(re.escape(c) for c in sorted(choices, key=len, reverse=True))
    # The choice must end at a word boundary, and must not be followed by "or <choice>" /
    # "/ <choice>" (the instruction echoed back: "The answer is: Yes or No").
    return re.compile(
        rf"{_LEAD}{_DECOR}(?P<choice>{alts})\b(?!{_DECOR}(?:or|/|and)\s*{_DECOR}(?:{alts})\b)",
        re.IGNORECASE,
    )


def parse_final_answer(text: str, choices: Sequence[str] = ("yes", "no")) -> str | None:
    """Return the choice (lower-cased) named by the LAST "The answer is: X" in ``text``.

    Case, markdown emphasis, quotes, brackets and trailing punctuation or text are tolerated.
    Returns ``None`` when no such statement names one of ``choices`` (including an echoed
    "Yes or No"): callers must treat that as *unknown*, never as a default label.
    """
    if not text or not choices:
        return None
    wanted = tuple(c.strip().lower() for c in choices if c.strip())
    matches = [
        m
        for m in _pattern(wanted).finditer(text)
        if not _ECHO.search(text[max(0, m.start() - 60) : m.start()])
    ]
    if not matches:
        return None
    return matches[-1].group("choice").lower()


def split_rationale(text: str) -> str:
    """The explanation in a reply: the text before its last "The answer is" statement."""
    matches = list(re.finditer(_LEAD, text, re.IGNORECASE))
    head = text[: matches[-1].start()] if matches else text
    return head.strip().rstrip("*_ \n").strip()
