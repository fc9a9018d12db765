"""The learned baselines' detector: a feature extractor and a trained MLP head (``nli``, ``probe``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.detection.detectors.base import BaseDetector
from scopeguard.detection.head.mlp import CONFIG_FILE, WEIGHTS_FILE, TrainedHead
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.types import Document, Label, Verdict

__all__ = ["HeadDetector"]


class HeadDetector(BaseDetector):
    """A detector made of a feature extractor and a :class:`TrainedHead` (base of ``nli`` and ``probe``).

    The verdict's score is P(out of scope); with several documents that are scored one by one
    the lowest P(out of scope) counts (the question is in scope if any document covers it).
    """

    name = "head"

    def __init__(
        self,
        model: str | os.PathLike[str] | TrainedHead | None,
        *,
        threshold: float | None = None,
        packaged: str | os.PathLike[str] | None = None,
        **extractor_overrides: Any,
    ) -> None:
        from scopeguard.detection.read import extractor_from_identity

        if model is None and packaged is not None and (Path(packaged) / CONFIG_FILE).is_file():
            model = packaged
        if model is None:
            raise ConfigurationError(
                f"the {self.name!r} detector needs a trained head: train one with "
                f"`scopeguard train-detector DATASET_DIR --detector {self.name} --out DIR` and load it "
                f"with get_detector({self.name!r}, model=DIR)"
            )
        self.head = model if isinstance(model, TrainedHead) else TrainedHead.load(model, detector=self.name)
        self.source = "<in memory>" if isinstance(model, TrainedHead) else str(Path(model) / WEIGHTS_FILE)
        if threshold is not None and not 0.0 < threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {threshold}")
        self.threshold = self.head.threshold if threshold is None else threshold
        self.extractor = extractor_from_identity(self.head.config.features, **extractor_overrides)

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        rows, notes = self.extractor.pair_features(question, documents)
        if rows.shape[1] != self.head.config.input_dim:
            raise ModelError(
                f"{self.source}: the head expects {self.head.config.input_dim} features but the "
                f"extractor gives {rows.shape[1]} (mismatched model)"
            )
        p = float(np.clip(self.head.predict_proba(rows).min(), 0.0, 1.0))
        label: Label = "out_of_scope" if p >= self.threshold else "in_scope"
        rationale = " ".join((f"P(out of scope) = {p:.3f} from the trained {self.name} head.", *notes))
        return Verdict(label=label, score=p, rationale=rationale, detector=self.name)
