"""Parse the classifier's reply (Yes / No / Not Related) into a verification label.

The paper's Figure 4 prompt asks for only "Yes", "Not Related" or "No". Small models wrap
that in markdown, quotes, a "Classification:" prefix, a trailing explanation or the
"The answer is: X" idiom; those shapes are accepted. Anything else (an echo of the
instruction listing several classes, a hedge, an empty reply) is ``unknown``, never a default.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["LABEL_OF_CLASS", "VerificationLabel", "parse_verification"]

VerificationLabel = Literal["supported", "contradicted", "not_related", "unknown"]
"""``supported`` (Yes), ``contradicted`` (No: a hallucination), ``not_related``, or ``unknown``."""

LABEL_OF_CLASS: dict[str, VerificationLabel] = {
    "yes": "supported",
    "no": "contradicted",
    "not related": "not_related",
    "unrelated": "not_related",
}

_CLASS = r"(not[\s_-]+related|unrelated|yes|no)"
_CLASS_RE = re.compile(rf"\b{_CLASS}\b")
_LEADING_RE = re.compile(rf"{_CLASS}\b")
_FINAL_RE = re.compile(r"the\s+(?:final\s+)?answer\s+is\s*[:\-]?", re.IGNORECASE)
_PREFIX_RE = re.compile(
    r"^(?:(?:the\s+)?(?:final\s+)?(?:classification(?:\s+result)?|result|answer|label|category|"
    r"prediction|output|response|class|verdict)\b\s*(?:is)?\s*[:=\-]?\s*)",
)
_NUMBERING_RE = re.compile(r"^(?:\d+\s*[\).:]\s*)")
_CLAUSE_END_RE = re.compile(r"[.,;!?\n(:]")
_NAMED_RE = re.compile(
    rf"(?:classif(?:y|ied|ication)(?:\s+(?:it|this|them|the\s+pair|the\s+answers))?(?:\s+result)?(?:\s+is|\s+as)?|category(?:\s+is)?|label(?:\s+is)?)"
    rf"\s*[:\-]?\s*[\"'“]?{_CLASS}\b"
)


def _normalise(text: str) -> str:
    text = re.sub(r"[*`#>\[\]]", "", text).replace("_", " ")
    return text.strip().lower()


def _canonical(match: str) -> str:
    return "not related" if match.startswith("not") else match


def _leading_class(text: str) -> str | None:
    """The class the reply starts with, when its first clause names exactly one class."""
    s = text.strip().lstrip("\"'“”‘’ ")
    for _ in range(3):  # "Answer: 3) Yes", "Classification result: Yes" ...
        stripped = _NUMBERING_RE.sub("", _PREFIX_RE.sub("", s)).lstrip("\"'“”‘’ ")
        if stripped == s:
            break
        s = stripped
    m = _LEADING_RE.match(s)
    if m is None:
        return None
    end = _CLAUSE_END_RE.search(s, m.end())
    clause = s[: end.start()] if end else s
    found = {_canonical(x) for x in _CLASS_RE.findall(clause)}
    return found.pop() if len(found) == 1 else None


def parse_verification(text: str | None) -> VerificationLabel:
    """Map a classifier reply to ``supported`` / ``contradicted`` / ``not_related`` / ``unknown``.

    >>> parse_verification("**Not Related**")
    'not_related'
    >>> parse_verification('Yes, "No" or "Not Related"')
    'unknown'
    """
    if not text or not text.strip():
        return "unknown"
    norm = _normalise(text)
    finals = list(_FINAL_RE.finditer(norm))
    if finals:  # "... The answer is: No." (the last one wins)
        cls = _leading_class(norm[finals[-1].end() :])
        return LABEL_OF_CLASS[cls] if cls else "unknown"
    cls = _leading_class(norm)
    if cls is not None:
        return LABEL_OF_CLASS[cls]
    named = {_canonical(x) for x in _NAMED_RE.findall(norm)}
    if len(named) == 1:  # "I would classify this as Not Related."
        return LABEL_OF_CLASS[named.pop()]
    return "unknown"
