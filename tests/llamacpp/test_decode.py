"""Reading tokens into a real llama.cpp context below ``Llama.eval`` (SmolLM2-135M)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scopeguard.errors import LLMError
from scopeguard.llamacpp import decode, load_llama, logits_row


def test_logits_at_every_position_match_the_last_row_of_a_piece_by_piece_read(smollm2: Path) -> None:
    llm = load_llama(smollm2, purpose="test", n_ctx=128, n_batch=16, n_threads=1)
    try:
        ids = list(llm.tokenize(b"The ferry leaves the harbour at nine every morning.", add_bos=False))
        row = decode(llm, ids, 0, all_logits=True)
        assert row == len(ids) - 1
        every = [logits_row(llm, i) for i in range(len(ids))]
        # the same prefix read alone ends in the row read with all of them
        llm._ctx.kv_cache_clear()
        last = decode(llm, ids[:5], 0)
        assert last == 4
        np.testing.assert_allclose(logits_row(llm, last), every[4], atol=1e-3)
        assert not np.allclose(every[3], every[4])
        # longer than one batch: read in pieces; the last row is the last piece's
        llm._ctx.kv_cache_clear()
        long = ids * 3
        assert decode(llm, long, 0) == (len(long) - 1) % 16
        with pytest.raises(LLMError, match="exceed the batch"):
            decode(llm, long, 0, all_logits=True)
    finally:
        llm.close()


def test_a_thread_limit_holds_for_prompt_decoding_too(smollm2: Path) -> None:
    """The bindings decode prompts on every core unless told; n_threads limits both."""
    llm = load_llama(smollm2, purpose="test", n_ctx=128, n_threads=1)
    try:
        assert (llm.context_params.n_threads, llm.context_params.n_threads_batch) == (1, 1)
    finally:
        llm.close()
