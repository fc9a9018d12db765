"""The ``fast`` detector: the fast read's two features, combined by a tiny logistic head.

The features (:mod:`scopeguard.detection.read.fast`): ``coverage``, the share of the question's
content words that occur in the documents, and ``alignment``, how well the question's content
word-pieces align with the documents' tokens in MiniLM's contextual embeddings. The head
(:class:`~scopeguard.detection.head.fast.FastHead`, ``scopeguard/_assets/fast_head.json``)
turns them into ``Verdict.score`` = P(out of scope); the label is ``out_of_scope`` when the score
is at least ``threshold`` (0.5 unless the head file or the caller says otherwise).

``Verdict.uncovered`` lists the spans of the question made of consecutive content words that are
neither in the documents' vocabulary (after stemming) nor aligned above ``word_threshold``.

What it cannot catch: both features measure whether the question's words are in the documents,
not whether the documents say what the question asks. A question that reuses the documents'
words but asks for something they never state (SQuAD 2.0's unanswerable questions) scores as in
scope: on SQuAD 2.0 ``fast`` is at chance (0.53 accuracy). An in-scope question that paraphrases
the documents scores as out of scope. Use it where milliseconds matter and the questions are not
adversarial.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from scopeguard.detection.detectors.base import BaseDetector
from scopeguard.detection.head.fast import FastHead, default_head_path
from scopeguard.detection.read.fast import DEFAULT_MAX_CHARS, FastFeaturizer
from scopeguard.detection.read.text import check_length, max_chars_option
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document, Label, Verdict

__all__ = ["FastDetector"]


class FastDetector(BaseDetector):
    """Lexical coverage + MiniLM token alignment, combined by a shipped logistic head.

    ``model``: a head file or folder (default: the packaged head). ``encoder``: the
    sentence-transformers model for token embeddings (default: the head's, ``minilm``).
    ``threshold``: P(oos) at or above which the label is ``out_of_scope`` (default: the head's).
    ``word_threshold``: the alignment below which a question word absent from the documents is
    reported in ``uncovered``. ``max_chars``: the most characters the documents of one check may
    total (default 500,000; None: no limit); longer ones raise
    :class:`~scopeguard.errors.DocumentTooLongError` at once instead of embedding every sentence
    (measured on one shared CPU core: about 30 CPU seconds per 200,000 characters of prose).
    ``cache_size`` / ``cache_mb``: the bounds of the document-side cache (documents, megabytes of
    token vectors; default 256 and 256).
    """

    name = "fast"

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        encoder: str | None = None,
        threshold: float | None = None,
        word_threshold: float = 0.7,
        max_chars: int | None = DEFAULT_MAX_CHARS,
        cache_size: int = 256,
        cache_mb: float = 256.0,
    ) -> None:
        self.head = FastHead.load(model if model is not None else default_head_path())
        self.threshold = self.head.threshold if threshold is None else float(threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {self.threshold}")
        self.max_chars = max_chars_option(max_chars)
        self.featurizer = FastFeaturizer(
            encoder or self.head.encoder,
            word_threshold=word_threshold,
            cache_size=cache_size,
            cache_mb=cache_mb,
            max_chars=max_chars,
        )

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        check_length((d.text for d in documents), self.max_chars, owner="FastDetector")
        values, uncovered = self.featurizer.analyse(question, documents)
        score = self.head.predict(values)
        label: Label = "out_of_scope" if score >= self.threshold else "in_scope"
        rationale = (
            f"{values['coverage']:.0%} of the question's content words occur in the documents; "
            f"token alignment {values['alignment']:.2f}; P(out of scope) {score:.2f}"
        )
        if uncovered:
            rationale += "; not supported: " + ", ".join(repr(u) for u in uncovered)
        return Verdict(label=label, score=score, rationale=rationale, uncovered=uncovered)
