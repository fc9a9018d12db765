"""A BERT encoder in plain torch, for token vectors without importing transformers.

transformers' model classes pull in about 4 s of imports on a small CPU (torch.distributed,
dynamo, generation utilities), more than the fast detector's whole first check. A sentence-
transformers model whose transformer is a plain BERT (the packaged all-MiniLM-L6-v2) is read here
instead: ``config.json``, ``model.safetensors`` and ``tokenizer.json`` (through the ``tokenizers``
library that transformers itself wraps), and the encoder's forward pass (embeddings, then
self-attention layers; no pooler) runs with the same operations, so the last hidden states equal
``BertModel``'s up to float rounding (``tests/test_models.py`` compares them). Anything else (a
different architecture, relative positions, weights in another format) returns ``None`` from
:func:`load_bert` and is left to transformers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BertEncoder", "BertTokenizer", "load_bert"]

_ACTIVATIONS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}


class BertTokenizer:
    """The subset of a transformers fast tokenizer that token embeddings use, over ``tokenizer.json``."""

    model_input_names = ("input_ids", "token_type_ids", "attention_mask")
    pad_token_type_id = 0

    def __init__(self, folder: Path, special_tokens: dict[str, str]) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tok.no_padding()
        self._tok.no_truncation()
        self._max_length: int | None = None
        self._lock = threading.Lock()
        try:
            config = json.loads((folder / "tokenizer_config.json").read_text("utf-8"))
        except (OSError, ValueError):
            config = {}
        self.model_max_length = int(config.get("model_max_length") or 512)
        ids = {name: self._tok.token_to_id(token) for name, token in special_tokens.items()}
        self.all_special_ids = sorted({i for i in ids.values() if i is not None})
        self.pad_token_id = ids.get("pad_token") or 0

    def __call__(
        self,
        texts: list[str],
        *,
        truncation: bool = False,
        max_length: int | None = None,
        return_offsets_mapping: bool = False,
    ) -> dict[str, list[Any]]:
        limit = max_length if truncation else None
        with self._lock:  # truncation is the tokenizer's state
            if limit != self._max_length:
                if limit is None:
                    self._tok.no_truncation()
                else:
                    self._tok.enable_truncation(limit)
                self._max_length = limit
            encodings = self._tok.encode_batch(texts)
        out: dict[str, list[Any]] = {
            "input_ids": [e.ids for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
        }
        if return_offsets_mapping:
            out["offset_mapping"] = [e.offsets for e in encodings]
        return out

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self._tok.id_to_token(i) or "" for i in ids]


@dataclass(frozen=True)
class _Config:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    layer_norm_eps: float
    approximate: str  # F.gelu's approximate argument


@dataclass(frozen=True)
class _Output:
    last_hidden_state: Any


class BertEncoder:
    """BERT's encoder forward pass (inference only) over a checkpoint's tensors."""

    def __init__(self, config: _Config, weights: dict[str, Any]) -> None:
        self.config = config
        self._w = weights

    def __call__(
        self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None, position_ids: Any = None
    ) -> _Output:
        """Last hidden states of a padded batch (``attention_mask`` of shape (batch, length)), or of
        packed sequences (``attention_mask`` of shape (batch, length, length): which positions each
        position may attend to; ``position_ids`` then restart at every packed sequence)."""
        import torch
        import torch.nn.functional as F

        w, c = self._w, self.config
        batch, length = input_ids.shape
        heads, size = c.num_attention_heads, c.hidden_size // c.num_attention_heads
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = w["embeddings.position_embeddings.weight"]

        def norm(x: Any, name: str) -> Any:
            return F.layer_norm(x, (c.hidden_size,), w[f"{name}.weight"], w[f"{name}.bias"], c.layer_norm_eps)

        def linear(x: Any, name: str) -> Any:
            return F.linear(x, w[f"{name}.weight"], w[f"{name}.bias"])

        def split(x: Any) -> Any:
            return x.view(batch, length, heads, size).transpose(1, 2)

        with torch.inference_mode():
            x = (
                F.embedding(input_ids, w["embeddings.word_embeddings.weight"])
                + (positions[:length] if position_ids is None else F.embedding(position_ids, positions))
                + F.embedding(token_type_ids, w["embeddings.token_type_embeddings.weight"])
            )
            x = norm(x, "embeddings.LayerNorm")
            pairs = attention_mask.dim() == 3  # (batch, query, key), else (batch, key)
            keep = (attention_mask[:, None, :, :] if pairs else attention_mask[:, None, None, :]).to(
                torch.bool
            )
            mask = torch.zeros(keep.shape, dtype=x.dtype).masked_fill(~keep, torch.finfo(x.dtype).min)
            for i in range(c.num_hidden_layers):
                p = f"encoder.layer.{i}"
                q = split(linear(x, f"{p}.attention.self.query"))
                k = split(linear(x, f"{p}.attention.self.key"))
                v = split(linear(x, f"{p}.attention.self.value"))
                context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                context = context.transpose(1, 2).reshape(batch, length, c.hidden_size)
                attended = linear(context, f"{p}.attention.output.dense")
                x = norm(attended + x, f"{p}.attention.output.LayerNorm")
                h = F.gelu(linear(x, f"{p}.intermediate.dense"), approximate=c.approximate)
                x = norm(linear(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        return _Output(x)

    def packed(self, sequences: list[list[int]]) -> list[Any]:
        """The last hidden states of each token-id sequence, computed as one packed sequence with
        attention kept within each one and positions restarting at each: the same vectors as a
        padded batch (up to float rounding) without computing any padding."""
        import torch

        ids = torch.tensor([[t for seq in sequences for t in seq]], dtype=torch.long)
        owner = torch.tensor([i for i, seq in enumerate(sequences) for _ in seq])
        positions = torch.tensor([[j for seq in sequences for j in range(len(seq))]], dtype=torch.long)
        mask = (owner[:, None] == owner[None, :])[None]
        hidden = self(ids, mask, position_ids=positions).last_hidden_state[0]
        return list(torch.split(hidden, [len(seq) for seq in sequences]))


def _special_tokens(folder: Path) -> dict[str, str] | None:
    try:
        raw = json.loads((folder / "special_tokens_map.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    out: dict[str, str] = {}
    for name, value in raw.items():
        token = value.get("content") if isinstance(value, dict) else value
        if isinstance(token, str):
            out[name] = token
    return out


def load_bert(folder: Path) -> tuple[BertTokenizer, BertEncoder] | None:
    """The tokenizer and encoder of the plain BERT in ``folder``, or None when it is not one this
    module reproduces exactly (then load it with transformers)."""
    files = [folder / n for n in ("config.json", "model.safetensors", "tokenizer.json")]
    special = _special_tokens(folder)
    if special is None or not all(f.is_file() for f in files):
        return None
    try:
        cfg = json.loads(files[0].read_text("utf-8"))
    except (OSError, ValueError):
        return None
    approximate = _ACTIVATIONS.get(str(cfg.get("hidden_act")))
    if (
        cfg.get("model_type") != "bert"
        or approximate is None
        or cfg.get("position_embedding_type", "absolute") != "absolute"
        or cfg.get("is_decoder")
    ):
        return None
    from safetensors.torch import load_file

    weights = {k.removeprefix("bert."): v for k, v in load_file(str(files[1])).items()}
    config = _Config(
        hidden_size=int(cfg["hidden_size"]),
        num_hidden_layers=int(cfg["num_hidden_layers"]),
        num_attention_heads=int(cfg["num_attention_heads"]),
        layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
        approximate=approximate,
    )
    needed = [
        "embeddings.word_embeddings.weight",
        "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight",
        f"encoder.layer.{config.num_hidden_layers - 1}.output.LayerNorm.weight",
    ]
    if not all(n in weights for n in needed):
        return None
    return BertTokenizer(folder, special), BertEncoder(config, weights)
