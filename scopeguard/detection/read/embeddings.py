"""Sentence-embedding features for the SBERT-NLI baseline (ELOQ section 4.1, ScopeQA appendix H.3).

Document and question embeddings ``u`` and ``v`` from a sentence-transformers model (the
paper's all-mpnet-base-v2 by default; ``"minilm"`` for fast tests) are combined into
``[u; v; |u - v|]`` (Reimers and Gurevych, 2019). Pooling is the paper's ``"cls"`` (the first
token's last-layer state) or ``"mean"`` (the model's own pooling pipeline, normalised for
mpnet/MiniLM). Document embeddings are cached by content hash, in memory and on disk, so a
guarded RAG pipeline pays only for embedding the question.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from scopeguard import _progress
from scopeguard.detection.read._feature_cache import FeatureCache, stable_hash
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document

__all__ = [
    "POOLINGS",
    "EmbeddingFeatures",
]

logger = logging.getLogger(__name__)

Pooling = Literal["cls", "mean"]
POOLINGS: tuple[str, ...] = ("cls", "mean")


class EmbeddingFeatures:
    """``[u; v; |u-v|]`` features from a sentence-transformers model."""

    def __init__(
        self,
        *,
        embedding_model: str = "mpnet",
        pooling: Pooling = "cls",
        batch_size: int = 16,
        cache_root: str | None = None,
    ) -> None:
        if pooling not in POOLINGS:
            raise ConfigurationError(f"unknown pooling {pooling!r}; valid: {', '.join(POOLINGS)}")
        if not isinstance(embedding_model, str) or not embedding_model.strip():
            raise ConfigurationError("embedding_model must be a model name or path")
        self.embedding_model = embedding_model
        self.pooling: Pooling = pooling
        self.batch_size = batch_size
        self._cache = FeatureCache(self.identity, root=cache_root)
        self._memory: dict[str, np.ndarray] = {}

    @classmethod
    def from_identity(cls, identity: dict[str, Any], **overrides: Any) -> EmbeddingFeatures:
        kwargs: dict[str, Any] = {"embedding_model": identity["model"], "pooling": identity["pooling"]}
        kwargs.update(overrides)
        return cls(**kwargs)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "embeddings", "model": self.embedding_model, "pooling": self.pooling}

    @property
    def model(self) -> Any:
        from scopeguard.models import sentence_model

        return sentence_model(self.embedding_model)

    def _encode(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        model = self.model
        if self.pooling == "mean":
            out = model.encode(
                texts, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=progress
            )
            return np.asarray(out, dtype=np.float32)
        tokens = model.encode(
            texts, batch_size=self.batch_size, output_value="token_embeddings", show_progress_bar=progress
        )
        return np.stack([t[0].detach().cpu().float().numpy() for t in tokens]).astype(np.float32)

    def embed(self, texts: Sequence[str], *, persist: bool = True, progress: bool = False) -> np.ndarray:
        """Embeddings of ``texts``, cached in memory and on disk (``persist=False``: not stored)."""
        keys = [stable_hash(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        for k in keys:
            vec = self._memory.get(k)
            if vec is None:
                vec = self._cache.get(k)
            if vec is not None:
                found[k] = vec
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            by_key = dict(zip(keys, texts, strict=True))
            vectors = self._encode([by_key[k] for k in todo], progress=progress)
            for k, vec in zip(todo, vectors, strict=True):
                found[k] = vec
                if persist:
                    self._cache.put(k, vec)
        for k in keys:
            if persist:
                self._memory[k] = found[k]
        return np.stack([found[k] for k in keys])

    @staticmethod
    def combine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``[u; v; |u - v|]`` row-wise."""
        return np.concatenate([u, v, np.abs(u - v)], axis=-1).astype(np.float32)

    def pair_features(
        self, question: str, documents: Sequence[Document]
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        u = self.embed([d.text for d in documents])
        v = self.embed([question], persist=False)
        return self.combine(u, np.repeat(v, len(u), axis=0)), ()

    def batch_features(
        self, pairs: Sequence[tuple[str, Document]], *, progress: bool | None = None
    ) -> np.ndarray:
        show = _progress.show_progress(progress)
        u = self.embed([d.text for _, d in pairs], progress=show)
        v = self.embed([q for q, _ in pairs], progress=show)
        return self.combine(u, v)
