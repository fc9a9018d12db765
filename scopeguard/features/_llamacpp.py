"""Hidden states with llama.cpp: a GGUF model opened with ``embedding=True`` and pooling NONE.

With pooling NONE llama.cpp returns the last layer's (normed) state of every token; the probe
reads the last row, the appended unused token's. llama.cpp exposes no other layer, so any
``layer`` but -1 is a :class:`~scopeguard.errors.ConfigurationError` naming the transformers
backend, which has them all.

Every input is decoded in two steps, the prefix (BOS, instruction, document) and then the rest
(question, token); when the prefix equals the previous input's, its KV state is kept and only
the rest is computed. The two-step split is the same whether or not the prefix was reused, so
the features are identical either way.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from scopeguard._optional import require
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.llamacpp import load_llama

__all__ = ["LlamaCppBackend", "check_layer"]


def check_layer(layer: int) -> None:
    """Raise :class:`ConfigurationError` unless ``layer`` is -1, the only layer llama.cpp exposes."""
    if layer != -1:
        raise ConfigurationError(
            f"the llama_cpp backend only exposes the last layer's hidden state (layer=-1), not "
            f"layer={layer}; use backend='transformers' for other layers (it converts a GGUF file once)"
        )


class LlamaCppBackend:
    """Last-layer hidden states from llama-cpp-python."""

    name = "llama_cpp"

    def __init__(
        self, model_path: str, *, n_ctx: int = 2048, n_threads: int | None = None, layer: int = -1
    ) -> None:
        check_layer(layer)
        self.layer = -1
        llama_cpp = require("llama_cpp", extra="local", feature="the probe's llama.cpp backend")
        self._lib = llama_cpp
        self._lock = threading.Lock()
        self.llm: Any = load_llama(
            model_path,
            purpose="hidden states",
            embedding=True,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE,
            n_ctx=n_ctx,
            n_batch=n_ctx,
            n_ubatch=n_ctx,
            n_threads=n_threads or min(4, os.cpu_count() or 1),
        )
        meta: dict[str, str] = dict(self.llm.metadata or {})
        self.architecture = meta.get("general.architecture", "")
        self.vocab_size = int(self.llm.n_vocab())
        self.context_length = int(self.llm.n_ctx())
        self.n_embd = int(self.llm.n_embd())
        bos = int(self.llm.token_bos())
        adds_bos = meta.get("tokenizer.ggml.add_bos_token", "false").lower() == "true"
        self.bos_id: int | None = bos if adds_bos and bos >= 0 else None
        eos = int(self.llm.token_eos())
        self.eos_id: int | None = eos if eos >= 0 else None
        self._past: list[int] = []

    def tokenize(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def single_token_id(self, token: str) -> int | None:
        ids = self.llm.tokenize(token.encode("utf-8"), add_bos=False, special=True)
        if len(ids) != 1:
            return None
        text = self.llm.detokenize(ids, special=True).decode("utf-8", errors="replace")
        return int(ids[0]) if text == token else None

    def last_hidden(self, ids: list[int], prefix_len: int = 0) -> np.ndarray:
        if len(ids) > self.context_length:
            raise ModelError(f"{len(ids)} tokens exceed the llama.cpp context of {self.context_length}")
        split = max(0, min(prefix_len, len(ids) - 1))
        with self._lock:
            ctx = self.llm._ctx
            reuse = split > 0 and self._past[:split] == ids[:split] and len(self._past) >= split
            if not (reuse and ctx.kv_cache_seq_rm(-1, split, -1)):
                ctx.kv_cache_clear()
                self._past = []
                if split:
                    self._decode(ids[:split], 0)
            self._past = list(ids[:split])
            self._decode(ids[split:], split)
            ptr = self._lib.llama_get_embeddings_ith(ctx.ctx, len(ids) - split - 1)
            if not ptr:
                raise ModelError("llama.cpp returned no hidden state for the appended token")
            return np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).astype(np.float32, copy=True)

    def _decode(self, ids: list[int], n_past: int) -> None:
        batch = self.llm._batch
        batch.reset()
        batch.set_batch(ids, n_past, True)
        self.llm._ctx.decode(batch)
