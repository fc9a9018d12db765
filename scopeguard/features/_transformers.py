"""Hidden states with transformers: hub names, local folders, and GGUF files.

A GGUF file is dequantised by transformers once (20-60 s) and saved as bf16 safetensors in
``<cache>/hf-from-gguf/``; later loads take a few seconds. The forward pass runs in float32.

``layer`` indexes ``hidden_states`` of ``output_hidden_states=True``: 0 is the embeddings
output, ``n_layers`` (= -1) the last layer's (normed) output, and a negative index counts from
the top; anything outside ``-(n_layers + 1) .. n_layers`` is a
:class:`~scopeguard.errors.ConfigurationError` naming that range.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

import numpy as np

from scopeguard._optional import require
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.models import converted_gguf_dir

__all__ = ["TransformersBackend"]

logger = logging.getLogger(__name__)


@lru_cache(maxsize=2)
def _load(location: str) -> tuple[Any, Any]:
    torch = require("torch", extra="probe", feature="the probe's transformers backend")
    tf = require("transformers", extra="probe", feature="the probe's transformers backend")
    try:
        tok = tf.AutoTokenizer.from_pretrained(location)
        model = tf.AutoModelForCausalLM.from_pretrained(location, torch_dtype=torch.float32)
    except Exception as exc:
        raise ModelError(f"could not load causal LM {location!r} with transformers: {exc}") from None
    return tok, model.eval()


def _n_layers(config: Any) -> int | None:
    """Number of transformer blocks (text part of a multimodal config), or None if not stated."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    n = getattr(text, "num_hidden_layers", None)
    return int(n) if isinstance(n, int) and n > 0 else None


def _check_layer(layer: int, n_layers: int, model: str) -> None:
    if not -(n_layers + 1) <= layer <= n_layers:
        raise ConfigurationError(
            f"layer {layer} is out of range for {model}, which has {n_layers} layers: valid layers are "
            f"{-(n_layers + 1)} to {n_layers} (-1 = last layer, 0 = embeddings output)"
        )


class TransformersBackend:
    """Hidden states of one layer from ``AutoModelForCausalLM`` (``output_hidden_states=True``)."""

    name = "transformers"

    def __init__(
        self, location: str, *, gguf: bool = False, n_threads: int | None = None, layer: int = -1
    ) -> None:
        torch = require("torch", extra="probe", feature="the probe's transformers backend")
        if n_threads:
            torch.set_num_threads(n_threads)
        self.location = str(converted_gguf_dir(location)) if gguf else location
        self.tokenizer, self.model = _load(self.location)
        cfg = self.model.config
        self.n_layers = _n_layers(cfg)
        if self.n_layers is not None:
            _check_layer(layer, self.n_layers, self.location)
        self.layer = layer
        self.architecture = str(getattr(cfg, "model_type", "") or "")
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        self.context_length = int(getattr(cfg, "max_position_embeddings", 0) or 2048)
        tok = self.tokenizer
        adds_bos = tok.bos_token_id is not None and tok("x").input_ids[:1] == [tok.bos_token_id]
        self.bos_id: int | None = int(tok.bos_token_id) if adds_bos else None
        self.eos_id: int | None = int(tok.eos_token_id) if tok.eos_token_id is not None else None

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def single_token_id(self, token: str) -> int | None:
        tid = self.tokenizer.convert_tokens_to_ids(token)
        if tid is None or tid == self.tokenizer.unk_token_id or not 0 <= tid < self.vocab_size:
            return None
        return int(tid)

    def last_hidden(self, ids: list[int], prefix_len: int = 0) -> np.ndarray:
        """The last token's state at ``layer`` (one forward pass; ``prefix_len`` is not needed here)."""
        torch = require("torch", extra="probe", feature="the probe's transformers backend")
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False)
        states = out.hidden_states
        if self.n_layers is None:  # the config did not say; the output does
            _check_layer(self.layer, len(states) - 1, self.location)
        return np.asarray(states[self.layer][0, -1].float().numpy(), dtype=np.float32)
