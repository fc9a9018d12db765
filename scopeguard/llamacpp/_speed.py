"""How fast llama.cpp reads a prompt on this machine (``scopeguard doctor``, the loader benchmark)."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from scopeguard.llamacpp._loader import construct

__all__ = ["ReadSpeed", "measure_read_speed", "timed_reads"]

_TEXT = (
    "The river port handled more grain this year than in any year since the new locks opened, "
    "the authority said, although two of its cranes stood idle for a month while parts arrived. "
)


class ReadSpeed(BaseModel):
    """Prompt reading speed: the median of ``repeats`` reads of the same ``tokens``-token prompt."""

    model_config = ConfigDict(frozen=True)

    model: str
    extra_buffers: bool
    n_threads: int
    tokens: int
    repeats: int
    seconds: list[float]
    tokens_per_s: float
    load_s: float


def timed_reads(llm: Any, ids: list[int], repeats: int) -> list[float]:
    """Seconds of ``repeats`` reads of ``ids`` by a loaded llama.cpp model, each from an empty
    context in one decode."""
    seconds = []
    for _ in range(repeats):
        llm._ctx.kv_cache_clear()
        batch = llm._batch
        batch.reset()
        batch.set_batch(ids, 0, False)
        t0 = time.perf_counter()
        llm._ctx.decode(batch)
        seconds.append(round(time.perf_counter() - t0, 4))
    return seconds


def measure_read_speed(
    model_path: str | Path,
    *,
    extra_buffers: bool,
    tokens: int = 256,
    repeats: int = 3,
    n_threads: int | None = None,
    adapter: str | Path | None = None,
    **params: Any,
) -> ReadSpeed:
    """Load ``model_path`` (extra buffers as given: decide first; the GGUF LoRA ``adapter``
    applied; ``params``: more ``llama_cpp.Llama`` arguments, such as the reader's KV-cache type)
    and time ``repeats`` reads of one ``tokens``-token prompt from an empty context, in one decode
    each."""
    threads = n_threads or os.cpu_count() or 1
    start = time.perf_counter()
    llm: Any = construct(
        model_path,
        extra_buffers=extra_buffers,
        adapter=adapter,
        n_ctx=tokens + 16,
        n_batch=tokens,
        n_ubatch=min(tokens, 512),
        n_threads=threads,
        **params,
    )
    load_s = time.perf_counter() - start
    try:
        ids = list(llm.tokenize((_TEXT * (tokens // 30 + 2)).encode("utf-8"), add_bos=False))[:tokens]
        seconds = timed_reads(llm, ids, repeats)
    finally:
        llm.close()
    return ReadSpeed(
        model=Path(model_path).name,
        extra_buffers=extra_buffers,
        n_threads=threads,
        tokens=len(ids),
        repeats=repeats,
        seconds=seconds,
        tokens_per_s=round(len(ids) / statistics.median(seconds), 1),
        load_s=round(load_s, 2),
    )
