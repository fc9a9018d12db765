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


def test_a_ctrl_c_during_a_decode_is_raised_after_it_not_swallowed_by_the_eval_callback(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp calls a context's eval callback (the hidden-state tap) for every graph node; a
    SIGINT arriving then makes Python raise KeyboardInterrupt inside the callback, where ctypes
    prints and drops it. decode holds the signal and raises it once the decode has returned."""
    import os
    import signal
    import sys

    import llama_cpp

    if not callable(signal.getsignal(signal.SIGINT)):
        pytest.skip("SIGINT has no Python handler in this process")
    nodes: list[int] = []
    sent: list[int] = []

    def on_node(tensor: int, ask: bool, user_data: object) -> bool:
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)  # Python's handler runs while this callback does
        nodes.append(1)
        return False

    callback = llama_cpp.ggml_backend_sched_eval_callback(on_node)
    dropped: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_value))
    llm = load_llama(smollm2, purpose="test", n_ctx=128, n_threads=1, eval_callback=callback)
    try:
        ids = list(llm.tokenize(b"The ferry leaves the harbour at nine every morning.", add_bos=False))
        # unheld, as before: the interrupt is dropped inside the callback and the read goes on
        batch = llm._batch
        batch.reset()
        batch.set_batch(ids, 0, False)
        llm._ctx.decode(batch)
        assert [type(e) for e in dropped] == [KeyboardInterrupt]
        # held: the decode runs to its end, then the interrupt is raised to the caller
        nodes.clear()
        sent.clear()
        llm._ctx.kv_cache_clear()
        with pytest.raises(KeyboardInterrupt):
            decode(llm, ids, 0)
        assert len(nodes) > 1 and len(dropped) == 1
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        # and the context reads on as if nothing happened
        interrupted = logits_row(llm, len(ids) - 1)
        llm._ctx.kv_cache_clear()
        sent.append(1)  # no more signals
        np.testing.assert_allclose(logits_row(llm, decode(llm, ids, 0)), interrupted, atol=1e-4)
    finally:
        llm.close()


def test_holding_interrupts_leaves_other_threads_and_an_ignored_sigint_alone() -> None:
    import signal
    import threading

    from scopeguard.llamacpp._decode import interrupts_held

    failed: list[BaseException] = []

    def in_a_thread() -> None:
        try:
            with interrupts_held():  # signal.signal would raise off the main thread
                pass
        except BaseException as exc:
            failed.append(exc)

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    assert failed == []
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_held():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
