"""The paper baselines' extractor protocol and its lookup, with the feature cache every read is kept
in (its own module below the extractors); all re-exported by :mod:`scopeguard.detection.read`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from scopeguard.detection.read._feature_cache import FeatureCache, stable_hash
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document

__all__ = ["FeatureCache", "FeatureExtractor", "extractor_from_identity", "get_extractor", "stable_hash"]


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
