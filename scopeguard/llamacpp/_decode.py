"""Reading tokens into a llama.cpp context and taking the logits out, below ``Llama.eval``.

``Llama.eval`` keeps its own token history and copies every row of logits; the readers keep
their own history (shared prefixes, saved states) and want one row, or a row per token for a
question's fluency. :func:`decode` reads ``ids`` after ``n_past`` tokens already in the context,
in pieces of the context's batch size; :func:`logits_row` copies one row of logits out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scopeguard.errors import LLMError

__all__ = ["decode", "logits_row"]


def decode(llm: Any, ids: Sequence[int], n_past: int, *, all_logits: bool = False) -> int:
    """Decode ``ids`` after ``n_past`` cached tokens; the row of the last token's logits in the last
    piece. ``all_logits``: a row for every token (``ids`` must then fit one batch, ``n_batch``)."""
    step = int(llm.n_batch)
    if all_logits and len(ids) > step:
        raise LLMError(f"{len(ids)} tokens with logits at every position exceed the batch ({step})")
    last = 0
    for start in range(0, len(ids), step):
        piece = list(ids[start : start + step])
        batch = llm._batch
        batch.reset()
        batch.set_batch(piece, n_past + start, all_logits)
        llm._ctx.decode(batch)
        last = len(piece) - 1
    return last


def logits_row(llm: Any, row: int) -> np.ndarray:
    """A copy (float64) of the logits at ``row`` of the last decode."""
    import llama_cpp

    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, row)
    if not ptr:
        raise LLMError(f"llama.cpp returned no logits at row {row}")
    return np.ctypeslib.as_array(ptr, shape=(int(llm.n_vocab()),)).astype(np.float64, copy=True)
