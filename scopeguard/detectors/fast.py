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

Document-side work (token embeddings, stems) is cached by ``Document.content_hash`` in an LRU, so
a guarded RAG pipeline pays for one forward pass over the question.
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

from scopeguard._optional import require
from scopeguard.detectors._text import STOPWORDS, content_runs, content_stems, coverage, split_sentences, stem
from scopeguard.detectors.base import BaseDetector
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.types import Document, Label, Verdict

__all__ = ["FEATURES", "FastDetector", "FastFeaturizer", "FastHead", "TokenEncoder", "default_head_path"]

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
class TokenEmbeddings:
    """Last-layer token vectors (L2-normalised) of one text, with each piece's text and span."""

    vectors: np.ndarray
    pieces: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


class TokenEncoder:
    """Contextual token embeddings from a sentence-transformers model (``minilm``, ``mpnet``, a path)."""

    def __init__(self, name: str = "minilm", *, batch_size: int = 32) -> None:
        require("torch", extra="embeddings", feature="the fast detector")
        from scopeguard.models import sentence_model

        self.name = name
        self.batch_size = batch_size
        self._st = sentence_model(name)
        self._tokenizer = self._st.tokenizer
        self._model: Any = self._st[0].auto_model
        self._max_len = int(getattr(self._st, "max_seq_length", 256) or 256)
        self._special = set(self._tokenizer.all_special_ids)

    @staticmethod
    def max_similarity(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """For each row of ``queries``, the largest dot product with a row of ``keys``.

        Runs in torch (its intra-op thread setting applies) rather than numpy's BLAS, whose
        threads spin badly on an oversubscribed machine.
        """
        import torch

        if not len(queries) or not len(keys):
            return np.ones(len(queries), dtype=np.float32)
        with torch.inference_mode():
            sims = torch.from_numpy(queries).matmul(torch.from_numpy(keys).T)
            return sims.amax(dim=1).numpy()

    def embed(self, texts: Sequence[str]) -> list[TokenEmbeddings]:
        import torch

        out: list[TokenEmbeddings] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            enc = self._tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self._max_len,
                return_tensors="pt",
                return_offsets_mapping=True,
            )
            offsets = enc.pop("offset_mapping").tolist()
            with torch.inference_mode():
                hidden = self._model(**enc).last_hidden_state.float().numpy()
            ids = enc["input_ids"].tolist()
            mask = enc["attention_mask"].tolist()
            for row, (ids_i, mask_i, off_i) in enumerate(zip(ids, mask, offsets, strict=True)):
                pairs = enumerate(zip(ids_i, mask_i, strict=True))
                keep = [j for j, (t, m) in pairs if m and t not in self._special]
                vecs = hidden[row, keep]
                vecs = np.ascontiguousarray(
                    vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12), dtype=np.float32
                )
                pieces = tuple(self._tokenizer.convert_ids_to_tokens([ids_i[j] for j in keep]))
                spans = tuple((int(off_i[j][0]), int(off_i[j][1])) for j in keep)
                out.append(TokenEmbeddings(vecs, pieces, spans))
        return out


@dataclass(frozen=True)
class _DocSide:
    stems: frozenset[str]
    tokens: np.ndarray


def _is_content_piece(piece: str) -> bool:
    word = piece.lstrip("#▁Ġ").lower()
    return word.isalnum() and word not in STOPWORDS


class FastFeaturizer:
    """Computes the fast features for (question, documents); caches the document side by hash."""

    def __init__(
        self, encoder: str = "minilm", *, word_threshold: float = 0.7, cache_size: int = 256
    ) -> None:
        if cache_size < 1:
            raise ConfigurationError(f"cache_size must be >= 1, got {cache_size}")
        self.word_threshold = word_threshold
        self.encoder = TokenEncoder(encoder)
        self._cache: OrderedDict[str, _DocSide] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ document side (cached)
    def _doc_side(self, doc: Document) -> _DocSide:
        key = doc.content_hash
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        sentences = split_sentences(doc.text) or [doc.text]
        embs = self.encoder.embed(sentences)
        side = _DocSide(frozenset(content_stems(doc.text)), np.concatenate([e.vectors for e in embs]))
        with self._lock:
            self._cache[key] = side
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return side

    # ------------------------------------------------------------------ features
    def analyse(
        self, question: str, documents: Sequence[Document]
    ) -> tuple[dict[str, float], tuple[str, ...]]:
        sides = [self._doc_side(d) for d in documents]
        doc_stems = frozenset().union(*(s.stems for s in sides))
        doc_tokens = sides[0].tokens if len(sides) == 1 else np.concatenate([s.tokens for s in sides])
        q = self.encoder.embed([question])[0]
        best = self.encoder.max_similarity(q.vectors, doc_tokens)
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
    reported in ``uncovered``.
    """

    name = "fast"

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        encoder: str | None = None,
        threshold: float | None = None,
        word_threshold: float = 0.7,
        cache_size: int = 256,
    ) -> None:
        self.head = FastHead.load(model if model is not None else default_head_path())
        self.threshold = self.head.threshold if threshold is None else float(threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {self.threshold}")
        self.featurizer = FastFeaturizer(
            encoder or self.head.encoder, word_threshold=word_threshold, cache_size=cache_size
        )

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
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
