"""The ``probe`` baseline's llama.cpp backend: one layer's hidden state at the last token.

It reads through :class:`~scopeguard.detection.read.llamacpp.LlamaCppVerdicts` (one wrapper, one
loader, one layer tap for the verdicts and the probe).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
from scopeguard.errors import ModelError

__all__ = ["LlamaCppHiddenStates"]


class LlamaCppHiddenStates:
    """The paper's probe input read by llama.cpp: one layer's state at the last token.

    For the ``probe`` baseline (ELOQ section 4.2.1; :mod:`scopeguard.detection.read.hidden_states`):
    token ids (instruction, document, question, an appended unused token) read by a
    :class:`LlamaCppVerdicts` with ``layers=(layer,)``, so the probe's hidden states and the
    verdicts come from one llama.cpp wrapper, one loader and one layer tap, and any layer can be
    read (numbered like transformers' ``hidden_states``; ``-1`` the final normed state). Questions
    about the same document reuse its state (the live context is kept), with the same result as a
    fresh read.
    """

    name = "llama_cpp"

    def __init__(
        self, model_path: str, *, n_ctx: int = 2048, n_threads: int | None = None, layer: int = -1
    ) -> None:
        self.layer = layer
        self._verdicts = LlamaCppVerdicts(
            model_path,
            n_ctx=n_ctx,
            n_threads=n_threads or min(4, os.cpu_count() or 1),
            state_cache_mb=0,
            persist_states=False,
            layers=(layer,),
            kv_type="f16",  # keeps no states: the probe's features as they were fitted
        )
        llm = self._verdicts._load()
        meta: dict[str, str] = dict(llm.metadata or {})
        self.llm: Any = llm
        self.architecture = meta.get("general.architecture", "")
        self.vocab_size = int(llm.n_vocab())
        self.context_length = int(llm.n_ctx())
        self.n_embd = int(llm.n_embd())
        self.bos_id: int | None = self._verdicts._bos
        eos = int(llm.token_eos())
        self.eos_id: int | None = eos if eos >= 0 else None

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
        """The state of ``layer`` at the last of ``ids``, read split at ``prefix_len`` (see
        :meth:`LlamaCppVerdicts.hidden`: the same bits whether or not the prefix was kept)."""
        if len(ids) >= self.context_length:
            raise ModelError(f"{len(ids)} tokens exceed the llama.cpp context of {self.context_length}")
        return self._verdicts.hidden(ids, prefix_len=prefix_len)[0]

    def forget(self) -> None:
        """Drop the kept context (the next read starts from nothing)."""
        self._verdicts.forget()
