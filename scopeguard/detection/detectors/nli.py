"""The SBERT-NLI baseline detector (ELOQ section 4.1, ScopeQA appendix H.3).

Features ``[u; v; |u-v|]`` from document and question sentence embeddings (all-mpnet-base-v2,
CLS or mean pooling) go through a trained :class:`~scopeguard.detection.head.mlp.TrainedHead`.
Train a head with ``scopeguard train-detector DATASET_DIR --detector nli --out DIR`` (or
:func:`scopeguard.detection.head.training.train_detector`), then ``get_detector("nli", model=DIR)``.
Each retrieved document is scored on its own (its embedding is cached by content hash), and the
lowest P(out of scope) counts.

Paper settings: ``train_detector(DIR, "nli", OUT, standardize=False)`` (the training defaults plus
raw features, :meth:`TrainSettings.paper() <scopeguard.detection.head.mlp.TrainSettings.paper>`) is
ELOQ's baseline as published: mpnet CLS embeddings, a 2-layer MLP, Adam 1e-4, batch 8, 10 epochs.
By default scopeguard standardises the features first.
"""

from __future__ import annotations

import os
from typing import Any

from scopeguard.detection.detectors.learned import HeadDetector
from scopeguard.detection.head.mlp import TrainedHead

__all__ = ["NLIDetector"]


class NLIDetector(HeadDetector):
    """Sentence-embedding features and a trained MLP head; ``model`` is the head folder."""

    name = "nli"

    def __init__(
        self,
        model: str | os.PathLike[str] | TrainedHead | None = None,
        *,
        threshold: float | None = None,
        **extractor_overrides: Any,
    ) -> None:
        super().__init__(model, threshold=threshold, **extractor_overrides)
