"""The fast read: lexical coverage and contextual token alignment of a question in its documents.

Two features, both "recall of the question in the documents":

* ``coverage``: the share of the question's content words (stop-words removed, light stemming)
  that occur in the documents (the lexical baseline's score);
* ``alignment``: for every content word-piece of the question, the best cosine similarity with
  any token of the documents, using MiniLM's contextual token embeddings (last layer), averaged
  (BERTScore recall restricted to content pieces).

:class:`FastFeaturizer` computes them (and the question's spans the documents do not support);
the ``fast`` detector turns them into P(out of scope) with its head
(:class:`~scopeguard.detection.head.fast.FastHead`).

Document-side work (token embeddings, stems) is cached by ``Document.content_hash`` in an LRU
bounded by count and by megabytes (``cache_size``, ``cache_mb``), so a guarded RAG pipeline pays
for one forward pass over the question. Long documents: every sentence (a window of at most 60
words) is embedded as its own sequence, as when the head was trained, in batches of similar
length, once per distinct sentence. Documents totalling more than ``max_chars`` characters
(default 500,000) raise :class:`~scopeguard.errors.DocumentTooLongError` before any work.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scopeguard.detection.read.text import (
    STOPWORDS,
    check_length,
    content_runs,
    content_stem_set,
    content_stems,
    coverage,
    max_chars_option,
    sentence_windows,
    stem,
)
from scopeguard.detection.read.token_encoder import TokenEmbeddings, TokenEncoder
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document

__all__ = ["DEFAULT_MAX_CHARS", "FEATURES", "FastFeaturizer"]

logger = logging.getLogger(__name__)

FEATURES = ("coverage", "alignment")


@dataclass(frozen=True)
class _DocSide:
    stems: frozenset[str]
    tokens: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.tokens.nbytes) + 64 * len(self.stems)


def _is_content_piece(piece: str) -> bool:
    word = piece.lstrip("#▁Ġ").lower()
    return word.isalnum() and word not in STOPWORDS


DEFAULT_MAX_CHARS = 500_000
"""The fast detector's default limit on the characters of one check's documents: about 115,000
MiniLM tokens, 180 MB of token vectors and 70 CPU seconds (``benchmarks/long_documents.py``)."""


class FastFeaturizer:
    """Computes the fast features for (question, documents); caches the document side by hash.

    ``max_chars``: the most characters the documents of one call may total (None: no limit);
    above it :class:`~scopeguard.errors.DocumentTooLongError` is raised before any work.
    ``cache_size`` / ``cache_mb``: the document-side LRU keeps at most that many documents and
    that many megabytes of token vectors; a document larger than ``cache_mb`` is not kept.
    """

    def __init__(
        self,
        encoder: str = "minilm",
        *,
        word_threshold: float = 0.7,
        cache_size: int = 256,
        cache_mb: float = 256.0,
        max_chars: int | None = DEFAULT_MAX_CHARS,
    ) -> None:
        if cache_size < 1:
            raise ConfigurationError(f"cache_size must be >= 1, got {cache_size}")
        if not cache_mb >= 0:
            raise ConfigurationError(f"cache_mb must be >= 0, got {cache_mb}")
        self.word_threshold = word_threshold
        self.max_chars = max_chars_option(max_chars)
        self.encoder = TokenEncoder(encoder)
        self._cache: OrderedDict[str, _DocSide] = OrderedDict()
        self._cache_size = cache_size
        self._cache_bytes = int(cache_mb * 2**20)
        self._cached_bytes = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ document side (cached)
    def _doc_side(self, doc: Document) -> _DocSide:
        key = doc.content_hash
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        # every sentence (window of at most 60 words, 256 tokens) is one sequence, as the head
        # was trained; a repeated sentence has the same vectors, so it is embedded once
        sentences = list(dict.fromkeys(sentence_windows(doc.text))) or [doc.text]
        if len(doc.text) > 20_000:
            logger.info(
                "fast: embedding %d sentences of a %d-character document", len(sentences), len(doc.text)
            )
        side = _DocSide(frozenset(content_stem_set(doc.text)), self.encoder.stack(sentences))
        with self._lock:
            if side.nbytes <= self._cache_bytes and key not in self._cache:
                self._cache[key] = side
                self._cached_bytes += side.nbytes
                while len(self._cache) > self._cache_size or self._cached_bytes > self._cache_bytes:
                    self._cached_bytes -= self._cache.popitem(last=False)[1].nbytes
        return side

    @property
    def cached_bytes(self) -> int:
        """The bytes of token vectors (and an estimate for stems) the document cache holds."""
        return self._cached_bytes

    # ------------------------------------------------------------------ features
    def analyse(
        self, question: str, documents: Sequence[Document]
    ) -> tuple[dict[str, float], tuple[str, ...]]:
        """The feature values and the unsupported spans of the question.

        Raises :class:`~scopeguard.errors.DocumentTooLongError` when the documents exceed
        ``max_chars`` in total.
        """
        check_length((d.text for d in documents), self.max_chars, owner="FastFeaturizer")
        sides = [self._doc_side(d) for d in documents]
        doc_stems = frozenset().union(*(s.stems for s in sides))
        q = self.encoder.embed([question])[0]
        # the maximum over all documents' tokens, taken per document (no concatenated copy)
        best = self.encoder.max_similarity(q.vectors, sides[0].tokens)
        for side in sides[1:]:
            best = np.maximum(best, self.encoder.max_similarity(q.vectors, side.tokens))
        content = [i for i, p in enumerate(q.pieces) if _is_content_piece(p)]
        picked = best[content] if content else best
        values = {
            "coverage": coverage(content_stems(question), doc_stems),
            "alignment": float(picked.mean()) if picked.size else 1.0,
        }
        return values, self._uncovered(question, q, best, doc_stems)

    def _uncovered(
        self, question: str, q: TokenEmbeddings, best: np.ndarray, doc_stems: frozenset[str]
    ) -> tuple[str, ...]:
        out: list[str] = []
        for run in content_runs(question):
            span: list[tuple[str, int, int]] = []
            for word, start, end in [*run, ("", -1, -1)]:
                supported = True
                if word and stem(word) not in doc_stems:
                    scores = [best[j] for j, (a, b) in enumerate(q.spans) if a < end and b > start]
                    supported = bool(scores) and min(scores) >= self.word_threshold
                if word and not supported:
                    span.append((word, start, end))
                elif span:
                    out.append(question[span[0][1] : span[-1][2]])
                    span = []
        return tuple(dict.fromkeys(out))

    def features(self, question: str, documents: Sequence[Document]) -> dict[str, float]:
        """The raw feature values (for training a head); documents as :class:`Document`."""
        return self.analyse(question, documents)[0]
