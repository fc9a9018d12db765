"""Reading tokens into a llama.cpp context and taking the logits out, below ``Llama.eval``.

``Llama.eval`` keeps its own token history and copies every row of logits; the readers keep
their own history (shared prefixes, saved states) and want one row, or a row per token for a
question's fluency. :func:`decode` reads ``ids`` after ``n_past`` tokens already in the context,
in pieces of the context's batch size; :func:`logits_row` copies one row of logits out.

A Ctrl-C (SIGINT) during a decode is held until the decode returns (:func:`interrupts_held`): the
context's eval callback (the hidden-state tap, :mod:`._layers`) is Python code that llama.cpp calls
for every graph node, so Python's handler would raise ``KeyboardInterrupt`` inside it, where ctypes
prints the traceback and swallows it. The check then went on, the tap missed its tensor, and the
guard failed closed with a wrong reason ("computed no tensor for layers [21]") instead of stopping.

Each decode runs on the threads the other processes leave free (:mod:`._share`), at most the
model's own ``n_threads_batch``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from scopeguard.errors import LLMError
from scopeguard.llamacpp._share import threads_for

__all__ = ["decode", "interrupts_held", "logits_row"]


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT while the block runs and deliver it to the process's own handler after (so
    ``KeyboardInterrupt`` is raised here, not inside a ctypes callback that would swallow it). Only
    on the main thread (where Python runs signal handlers) and only when the handler is Python code;
    an ignored or default (process-ending) SIGINT is left as it is."""
    handler = signal.getsignal(signal.SIGINT)
    main = threading.current_thread() is threading.main_thread()
    deliver = handler if main and callable(handler) else None
    held: list[Any] = []
    if deliver is not None:
        try:
            signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
        except ValueError:  # not the main interpreter (a sub-interpreter's main thread)
            deliver = None
    if deliver is None:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, deliver)
        if held:
            deliver(signal.SIGINT, held[0])


def decode(llm: Any, ids: Sequence[int], n_past: int, *, all_logits: bool = False) -> int:
    """Decode ``ids`` after ``n_past`` cached tokens; the row of the last token's logits in the last
    piece. ``all_logits``: a row for every token (``ids`` must then fit one batch, ``n_batch``)."""
    step = int(llm.n_batch)
    if all_logits and len(ids) > step:
        raise LLMError(f"{len(ids)} tokens with logits at every position exceed the batch ({step})")
    last = 0
    _share_cores(llm)
    with interrupts_held():
        for start in range(0, len(ids), step):
            piece = list(ids[start : start + step])
            batch = llm._batch
            batch.reset()
            batch.set_batch(piece, n_past + start, all_logits)
            llm._ctx.decode(batch)
            last = len(piece) - 1
    return last


def _share_cores(llm: Any) -> None:
    """Set the context's threads to the cores free now (a no-op when they are already so)."""
    limit = int(getattr(llm, "n_threads_batch", 0) or 0)
    ctx = getattr(getattr(llm, "_ctx", None), "ctx", None)
    if limit < 2 or ctx is None:
        return
    threads = threads_for(limit)
    if getattr(llm, "_scopeguard_threads", limit) != threads:
        import llama_cpp

        llama_cpp.llama_set_n_threads(ctx, threads, threads)
        llm._scopeguard_threads = threads


def logits_row(llm: Any, row: int) -> np.ndarray:
    """A copy (float64) of the logits at ``row`` of the last decode."""
    import llama_cpp

    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, row)
    if not ptr:
        raise LLMError(f"llama.cpp returned no logits at row {row}")
    return np.ctypeslib.as_array(ptr, shape=(int(llm.n_vocab()),)).astype(np.float64, copy=True)
