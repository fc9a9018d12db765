"""The fast first stage: lexical coverage + contextual token alignment, combined by a tiny logistic head.

Two features, both "recall of the question in the documents":

* ``coverage``: the share of the question's content words (stop-words removed, light stemming)
  that occur in the documents (the lexical baseline's score);
* ``alignment``: for every content word-piece of the question, the best cosine similarity with
  any token of the documents, using MiniLM's contextual token embeddings (last layer), averaged
  (BERTScore recall restricted to content pieces). A question that reuses the document's words
  in a new combination aligns worse than one the text actually answers, because the pieces'
  contextual vectors differ.

A logistic head (``scopeguard/_assets/fast_head.json``; standardised features, one weight each)
turns them into ``Verdict.score`` = P(out of scope); the label is ``out_of_scope`` when the score
is at least ``threshold`` (0.5 unless the head file or the caller says otherwise).

``Verdict.uncovered`` lists the spans of the question made of consecutive content words that are
neither in the documents' vocabulary (after stemming) nor aligned above ``word_threshold``.

What it cannot catch: both features measure whether the question's words are in the documents,
not whether the documents say what the question asks. A question that reuses the documents'
words but asks for something they never state (SQuAD 2.0's unanswerable questions) scores as in
scope: on SQuAD 2.0 ``fast`` is at chance (0.53 accuracy). An in-scope question that paraphrases
the documents scores as out of scope. Use it where milliseconds matter and the questions are not
adversarial; the ``default`` detector sends its uncertain band to an LLM that reads the documents.

Document-side work (token embeddings, stems) is cached by ``Document.content_hash`` in an LRU
bounded by count and by megabytes (``cache_size``, ``cache_mb``), so a guarded RAG pipeline pays
for one forward pass over the question.

Long documents: every sentence (a window of at most 60 words) is embedded as its own sequence,
as when the head was trained, in batches of similar length (so that little compute goes to
padding), once per distinct sentence. The cost is linear in the text; documents totalling more
than ``max_chars`` characters (default 500,000) raise
:class:`~scopeguard.errors.DocumentTooLongError` before any work.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.detectors._text import (
    STOPWORDS,
    check_length,
    content_runs,
    content_stem_set,
    content_stems,
    coverage,
    max_chars_option,
    split_sentences,
    stem,
)
from scopeguard.detectors._token_encoder import TokenEmbeddings, TokenEncoder
from scopeguard.detectors.base import BaseDetector
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.types import Document, Label, Verdict

__all__ = [
    "DEFAULT_MAX_CHARS",
    "FEATURES",
    "FastDetector",
    "FastFeaturizer",
    "FastHead",
    "TokenEmbeddings",
    "TokenEncoder",
    "default_head_path",
]

logger = logging.getLogger(__name__)

FEATURES = ("coverage", "alignment")
HEAD_FILE = "fast_head.json"


def default_head_path() -> Path:
    """The head shipped in the package (``scopeguard/_assets/fast_head.json``)."""
    return Path(str(resources.files("scopeguard") / "_assets" / HEAD_FILE))


@dataclass(frozen=True)
class FastHead:
    """A logistic regression on standardised features: P(oos) = sigmoid(w . (x - mean) / scale + b)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float = 0.5
    encoder: str = "minilm"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.features)
        if not n or any(len(v) != n for v in (self.mean, self.scale, self.coef)):
            raise ModelError("fast head: features, mean, scale and coef must have the same non-zero length")
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ModelError(f"fast head: unknown feature(s) {unknown}; valid: {', '.join(FEATURES)}")
        if any(s <= 0 for s in self.scale):
            raise ModelError("fast head: scale values must be positive")

    def predict(self, values: dict[str, float]) -> float:
        z = self.intercept + sum(
            c * (values[f] - m) / s
            for f, m, s, c in zip(self.features, self.mean, self.scale, self.coef, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    @classmethod
    def load(cls, path: str | Path) -> FastHead:
        """Read a head from a JSON file, or from ``fast_head.json`` inside a folder."""
        p = Path(path)
        if p.is_dir():
            p = p / HEAD_FILE
        if not p.is_file():
            raise ModelError(f"fast head not found: {p}")
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
            return cls(
                features=tuple(raw["features"]),
                mean=tuple(float(v) for v in raw["mean"]),
                scale=tuple(float(v) for v in raw["scale"]),
                coef=tuple(float(v) for v in raw["coef"]),
                intercept=float(raw["intercept"]),
                threshold=float(raw.get("threshold", 0.5)),
                encoder=str(raw.get("encoder", "minilm")),
                info=dict(raw.get("info", {})),
            )
        except ModelError as exc:
            raise ModelError(f"{p}: {exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{p}: not a valid fast head ({type(exc).__name__}: {exc})") from None

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        if p.is_dir():
            p = p / HEAD_FILE
        body = {
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "threshold": self.threshold,
            "encoder": self.encoder,
            "info": self.info,
        }
        p.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        return p


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
        sentences = list(dict.fromkeys(split_sentences(doc.text))) or [doc.text]
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
