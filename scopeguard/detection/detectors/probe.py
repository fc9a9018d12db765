"""The hidden-state probe detector (ELOQ section 4.2.1, appendix C).

The hidden state of an unused token appended to instruction + document + question in a frozen
causal LM (the last layer's, or the ``layer`` the head was trained on) goes through a trained
:class:`~scopeguard.detection.head.mlp.TrainedHead`.
Train a head with ``scopeguard train-detector DATASET_DIR --detector probe --out DIR`` (or
:func:`scopeguard.detection.head.training.train_detector`), then ``get_detector("probe", model=DIR)``. The
head folder names the LLM, backend, layer, token and template, so the same features are rebuilt
(heads saved before the layer was recorded read the last layer). Train on another layer with
``train_detector(..., layer=-4)`` or ``--layer -4`` (llama.cpp and transformers read any layer;
layer 0, the token embeddings, only transformers).
Pass ``strict=True`` to raise :class:`~scopeguard.errors.DocumentTooLongError` instead of
truncating a document that does not fit the window (the verdict's rationale says when it was
truncated).

Paper settings (ELOQ appendix C): ``train_detector(DIR, "probe", OUT, standardize=False)``, the
training defaults with the hidden states fed raw
(:meth:`TrainSettings.paper() <scopeguard.detection.head.mlp.TrainSettings.paper>`); scopeguard
standardises them by default. The paper's probes read Llama and Mistral models on ELOQ-Silver.
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Any

from scopeguard.detection.detectors.learned import HeadDetector
from scopeguard.detection.head.mlp import TrainedHead
from scopeguard.errors import ConfigurationError

__all__ = ["PACKAGED_HEAD", "ProbeDetector"]

PACKAGED_HEAD = "probe-qwen2.5-coder-0.5b"
"""Folder under ``scopeguard/_assets`` of the head used when no ``model`` is given (if shipped)."""


class ProbeDetector(HeadDetector):
    """Hidden-state probe; ``model`` is the head folder (default: the packaged head, if shipped).

    The layer is the one the head was trained on; ``layer`` is only a check that it is the one
    you expect (a head cannot read another layer's features).
    """

    name = "probe"

    def __init__(
        self,
        model: str | os.PathLike[str] | TrainedHead | None = None,
        *,
        threshold: float | None = None,
        strict: bool = False,
        n_threads: int | None = None,
        layer: int | None = None,
        **extractor_overrides: Any,
    ) -> None:
        packaged = str(resources.files("scopeguard") / "_assets" / PACKAGED_HEAD)
        super().__init__(
            model,
            threshold=threshold,
            packaged=packaged,
            strict=strict,
            n_threads=n_threads,
            **extractor_overrides,
        )
        self.layer: int = int(self.head.config.features.get("layer", -1))
        if layer is not None and layer != self.layer:
            raise ConfigurationError(
                f"{self.source}: this head was trained on layer {self.layer} hidden states, not "
                f"layer {layer}; train a head for layer {layer} (train_detector(..., layer={layer}))"
            )
