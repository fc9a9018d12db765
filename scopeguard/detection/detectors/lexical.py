"""The lexical-coverage baseline: share of the question's content words found in the documents.

Content words are lower-cased tokens minus stop-words, lightly stemmed
(:mod:`scopeguard.detection.read.text`). A question whose coverage is below ``threshold`` is out of
scope. ``Verdict.score`` maps coverage to P(out of scope) piecewise-linearly so that coverage
``threshold`` gives 0.5, coverage 0 gives 1 and full coverage gives 0. ``uncovered`` lists the
question words missing from the documents. No model, no dependencies, well under a millisecond
for a retrieved passage; the time is linear in the documents' length (each distinct word is
stemmed once), about half a second per megabyte on one core. Documents totalling more than
``max_chars`` characters (default 10,000,000) raise :class:`~scopeguard.errors.DocumentTooLongError`.
"""

from __future__ import annotations

from collections.abc import Sequence

from scopeguard.detection.detectors.base import BaseDetector
from scopeguard.detection.read.text import (
    STOPWORDS,
    check_length,
    content_stem_set,
    content_stems,
    coverage,
    max_chars_option,
    stem,
    tokenize,
)
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document, Label, Verdict

__all__ = ["DEFAULT_MAX_CHARS", "LexicalDetector", "coverage_to_score"]

DEFAULT_MAX_CHARS = 10_000_000
"""The lexical detector's default limit on the characters of one check's documents."""


def coverage_to_score(cov: float, threshold: float) -> float:
    """P(out of scope) from coverage: 1 at 0, 0.5 at ``threshold``, 0 at full coverage."""
    if cov < threshold:
        return 0.5 + 0.5 * (threshold - cov) / threshold
    return max(0.0, 0.5 - 0.5 * (cov - threshold) / (1.0 - threshold))


class LexicalDetector(BaseDetector):
    """Out of scope when fewer than ``threshold`` of the question's content words occur in the documents.

    ``max_chars``: the most characters the documents of one check may total (None: no limit).
    """

    name = "lexical"

    def __init__(self, *, threshold: float = 0.5, max_chars: int | None = DEFAULT_MAX_CHARS) -> None:
        if not 0.0 < threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {threshold}")
        self.threshold = threshold
        self.max_chars = max_chars_option(max_chars)

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        check_length((d.text for d in documents), self.max_chars, owner="LexicalDetector")
        doc_stems: set[str] = set().union(*(content_stem_set(d.text) for d in documents))
        q_stems = content_stems(question)
        cov = coverage(q_stems, doc_stems)
        missing = tuple(
            dict.fromkeys(t for t in tokenize(question) if t not in STOPWORDS and stem(t) not in doc_stems)
        )
        label: Label = "out_of_scope" if cov < self.threshold else "in_scope"
        return Verdict(
            label=label,
            score=coverage_to_score(cov, self.threshold),
            rationale=f"{cov:.0%} of the question's content words occur in the documents "
            f"(threshold {self.threshold:.0%})",
            uncovered=missing,
        )
