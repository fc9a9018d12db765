"""Feature extraction for the learned detectors, with an on-disk cache.

- :class:`~scopeguard.features.embeddings.EmbeddingFeatures`: sentence embeddings ``[u; v; |u-v|]``
  of document and question (the SBERT-NLI baseline, ``nli`` detector).
- :class:`~scopeguard.features.hidden_states.HiddenStateFeatures`: the last-layer hidden state
  of an unused token appended to instruction + question + document (the ``probe`` detector).

Both expose ``identity`` (a JSON-able dict stored in a trained head, from which
:func:`extractor_from_identity` rebuilds the same extractor) and ``pair_features``.
Features are cached under :func:`cache_dir` (``$SCOPEGUARD_CACHE/features``, default
``~/.cache/scopeguard/features``), one file per item, written atomically: a killed extraction loses no
finished work and a re-run resumes.
"""

from __future__ import annotations

from scopeguard._paths import cache_dir
from scopeguard.features._base import FeatureCache, FeatureExtractor, extractor_from_identity, get_extractor

__all__ = [
    "FeatureCache",
    "FeatureExtractor",
    "cache_dir",
    "extractor_from_identity",
    "get_extractor",
]
