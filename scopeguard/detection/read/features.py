"""The feature cache every read is kept in, the paper baselines' extractor protocol and its lookup
(re-exported by :mod:`scopeguard.detection.read`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from scopeguard._paths import cache_dir
from scopeguard.data import atomic_open, atomic_write_text
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document

__all__ = ["FeatureCache", "FeatureExtractor", "extractor_from_identity", "get_extractor", "stable_hash"]


def stable_hash(*parts: Any) -> str:
    """SHA-256 of a JSON encoding of ``parts`` (stable across runs and processes)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class FeatureCache:
    """Float32 vectors on disk, one ``.npy`` per key, under a namespace derived from ``identity``."""

    def __init__(self, identity: dict[str, Any], *, root: str | os.PathLike[str] | None = None) -> None:
        self.identity = identity
        base = Path(root) if root is not None else cache_dir("features")
        self.directory = base / stable_hash(identity)[:24]

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.npy"

    def get(self, key: str) -> np.ndarray | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            return np.asarray(np.load(path, allow_pickle=False), dtype=np.float32)
        except (OSError, ValueError):
            path.unlink(missing_ok=True)  # a torn or foreign file: recompute
            return None

    def put(self, key: str, vector: np.ndarray) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (self.directory / "identity.json").is_file():
            atomic_write_text(self.directory / "identity.json", json.dumps(self.identity, indent=2))
        with atomic_open(path, "wb") as fh:
            np.save(fh, np.asarray(vector, dtype=np.float32), allow_pickle=False)


@runtime_checkable
class FeatureExtractor(Protocol):
    """Turns (question, documents) pairs into fixed-size vectors."""

    @property
    def identity(self) -> dict[str, Any]: ...

    def pair_features(
        self, question: str, documents: Sequence[Document]
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        """Feature rows ``(k, dim)`` for one question and its documents, and notes for the rationale.

        ``k`` is 1 when the documents are read together (probe) or the number of documents when
        each is scored on its own (nli); the detector takes the lowest P(out of scope).
        """
        ...

    def batch_features(
        self, pairs: Sequence[tuple[str, Document]], *, progress: bool | None = None
    ) -> np.ndarray:
        """Features for many (question, document) pairs (cached), stacked into ``(n, dim)``."""
        ...


def get_extractor(detector: str, **kwargs: Any) -> FeatureExtractor:
    """The feature extractor behind a learned detector (``"nli"`` or ``"probe"``)."""
    if detector == "nli":
        from scopeguard.detection.read.embeddings import EmbeddingFeatures

        return EmbeddingFeatures(**kwargs)
    if detector == "probe":
        from scopeguard.detection.read.hidden_states import HiddenStateFeatures

        return HiddenStateFeatures(**kwargs)
    raise ConfigurationError(f"no learned detector named {detector!r}; valid names: nli, probe")


def extractor_from_identity(identity: dict[str, Any], **overrides: Any) -> FeatureExtractor:
    """Rebuild the extractor a head was trained with, from the identity stored in ``head.json``."""
    kind = identity.get("kind")
    if kind == "embeddings":
        from scopeguard.detection.read.embeddings import EmbeddingFeatures

        return EmbeddingFeatures.from_identity(identity, **overrides)
    if kind == "hidden_states":
        from scopeguard.detection.read.hidden_states import HiddenStateFeatures

        return HiddenStateFeatures.from_identity(identity, **overrides)
    raise ConfigurationError(f"unknown feature kind {kind!r}; valid kinds: embeddings, hidden_states")
