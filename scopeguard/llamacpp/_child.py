"""The canary child: ``python -m scopeguard.llamacpp._child MODEL.gguf [ADAPTER.gguf]``.

Loads the model with extra buffer types, reads a short prompt in two decodes (several tokens,
then a few more after them, as the reading stage does), keeps the last token's logits; then the
same without extra buffers. Each load also times :data:`REPEATS` reads of a longer prompt
(:data:`TIMED_TOKENS` tokens in one decode, from an empty context), so the parent can keep the faster
path. Prints one JSON line: whether the two agree (finite logits correlated at least
:data:`MIN_CORRELATION`, next-token distributions within :data:`MAX_TOTAL_VARIATION`) and the reads'
seconds each way.
Repacked weights round differently (measured with Qwen2.5-Coder 0.5B / 1.5B Q4_K_M on an AVX2 CPU:
correlation 0.999, total variation 0.03, the same top token); a broken kernel gives garbage or
NaN. If the fast path crashes, the process dies here, in the child, and the parent chooses the
safe parameters. With a GGUF LoRA adapter, both loads read with it applied.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

from scopeguard.llamacpp._loader import construct
from scopeguard.llamacpp._speed import timed_reads

PROMPT = (
    "The harbour authority closed the northern pier in March after divers found cracks in two of "
    "its pillars. Repairs are expected to last until the autumn. Question: when did the pier close?"
)
MIN_CORRELATION = 0.98
MAX_TOTAL_VARIATION = 0.2
TIMED_TOKENS = 192
REPEATS = 3


def read_logits(
    path: str, *, extra_buffers: bool, adapter: str | None = None
) -> tuple[np.ndarray, float, list[float]]:
    """Last-token logits after reading :data:`PROMPT` in two decodes (with the LoRA ``adapter``
    applied), the seconds it took, and the seconds of :data:`REPEATS` timed reads."""
    llm: Any = construct(
        path,
        extra_buffers=extra_buffers,
        adapter=adapter,
        n_ctx=256,
        n_batch=256,
        n_ubatch=256,
        n_threads=os.cpu_count() or 1,
    )
    try:
        ids = list(llm.tokenize(PROMPT.encode("utf-8"), add_bos=True, special=False))
        split = max(2, len(ids) - 4)
        start = time.perf_counter()
        for begin, piece in ((0, ids[:split]), (split, ids[split:])):
            batch = llm._batch
            batch.reset()
            batch.set_batch(piece, begin, False)
            llm._ctx.decode(batch)
        seconds = time.perf_counter() - start
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, len(ids) - split - 1)
        logits = np.ctypeslib.as_array(ptr, shape=(int(llm.n_vocab()),)).astype(np.float64, copy=True)
        return logits, seconds, _timed_reads(llm)
    finally:
        llm.close()


def _timed_reads(llm: Any) -> list[float]:
    long = list(llm.tokenize((PROMPT + " ").encode("utf-8") * 8, add_bos=True, special=False))
    return timed_reads(llm, long[:TIMED_TOKENS], REPEATS)


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max())
    return e / e.sum()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m scopeguard.llamacpp._child MODEL.gguf [ADAPTER.gguf]", file=sys.stderr)
        return 2
    adapter = argv[1] if len(argv) == 2 else None
    fast, fast_s, fast_reads = read_logits(argv[0], extra_buffers=True, adapter=adapter)
    safe, safe_s, safe_reads = read_logits(argv[0], extra_buffers=False, adapter=adapter)
    finite = bool(np.isfinite(fast).all())
    diff = float(np.abs(fast - safe).max()) if finite else float("inf")
    corr = float(np.corrcoef(fast, safe)[0, 1]) if finite else 0.0
    tv = 0.5 * float(np.abs(_softmax(fast) - _softmax(safe)).sum()) if finite else 1.0
    same_top = int(fast.argmax()) == int(safe.argmax())
    agree = finite and corr >= MIN_CORRELATION and tv <= MAX_TOTAL_VARIATION
    detail = (
        f"read {len(PROMPT.split())} words with extra buffers in {fast_s:.2f}s and without in {safe_s:.2f}s; "
        f"logits correlation {corr:.4f}, total variation {tv:.3f}, same top token: {same_top}"
    )
    print(
        json.dumps(
            {
                "agree": agree,
                "max_logit_diff": round(diff, 6) if finite else None,
                "detail": detail,
                "extra_reads_s": fast_reads,
                "plain_reads_s": safe_reads,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
