"""The question side of a known-chunk check, decoded one chunk at a time or all in one batch (#60).

    python benchmarks/question_side.py [--reps 3]

With its chunks pre-read, a check decodes only each chunk's suffix: the end of the document fence,
the question, the closing instruction and the chat template's turn change (``default``'s prompt,
``answerability_verdict``). This times that decode alone, below the reader (no state restore, no
hidden-state tap, no state capture), with the packaged 1.5B loaded as the reader loads it, for 1, 4
and 8 chunks (250-word windows of 8 ELOQ news documents, each in its own llama.cpp sequence):

* **one at a time**: each chunk's suffix decoded on its own, in the reader's own context (one
  sequence, 4,096 tokens) holding only that chunk, as ``Guard.check`` does today;
* **one batch**: every chunk's suffix in one ``llama_decode``, each chunk in its own sequence of a
  second context (8 sequences, 8,192 tokens; #60 item 1; llama.cpp's unified KV cache: each token's
  attention spans every chunk's cells, masked);

and the same two with the closing instruction ("Does the document contain the answer to this
question? Answer Yes or No.") taken out of the suffix, as if the prompt asked it before the
document: a prompt the shipped head was not fitted on, timed only to show what the suffix's length
costs. Median over ``--reps`` questions, one a repetition. Prints the table and writes
``benchmarks/results/question_side.json`` (figures only), with the CPU named.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import eloq_windows, report, run_header

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "eloq-gold-dev"
RESULT = ROOT / "benchmarks" / "results" / "question_side.json"
WORDS = 250
CLOSING = "\n\nDoes the document contain the answer to this question? Answer Yes or No."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    if not (DATA / "documents.jsonl").is_file():
        raise SystemExit(f"needs the shared ELOQ dev set at {DATA}")

    import llama_cpp

    from scopeguard.detection.read import verdict_messages
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.prompts import render

    if CLOSING not in render("answerability_verdict", document="D", question="Q"):
        raise SystemExit("the verdict prompt's closing instruction changed: update CLOSING")
    windows = eloq_windows(DATA, WORDS)
    chunks = [text for _, text in windows]
    ids = {doc_id for doc_id, _ in windows}
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").open(encoding="utf-8")]
    asked = [q["question"] for q in questions if q["doc_id"] in ids][: args.reps]

    scorer = LlamaCppVerdicts()  # the packaged 1.5B, loaded as the reader loads it
    llm = scorer._load()
    params = llama_cpp.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = 8192, 2048, 512
    params.n_seq_max, params.kv_unified = 8, True
    threads = int(llm.context_params.n_threads)
    params.n_threads = params.n_threads_batch = threads
    ctx = llama_cpp.llama_init_from_model(llm.model, params)
    if not ctx:
        raise SystemExit("llama.cpp could not make a context with 8 sequences")
    memory = llama_cpp.llama_get_memory(ctx)

    own = llm._ctx.ctx  # the reader's own context (one sequence), as a check decodes today
    own_memory = llama_cpp.llama_get_memory(own)

    def decode(parts: list[tuple[int, int, list[int]]], into: Any = ctx) -> None:
        """Decode (sequence, first position, tokens) parts in one batch, logits at each part's end."""
        n = sum(len(t) for _, _, t in parts)
        batch = llama_cpp.llama_batch_init(n, 0, 1)
        try:
            batch.n_tokens, k = n, 0
            for seq, start, toks in parts:
                for i, tok in enumerate(toks):
                    batch.token[k], batch.pos[k], batch.n_seq_id[k] = tok, start + i, 1
                    batch.seq_id[k][0], batch.logits[k] = seq, i == len(toks) - 1
                    k += 1
            if llama_cpp.llama_decode(into, batch) != 0:
                raise SystemExit("llama_decode failed")
        finally:
            llama_cpp.llama_batch_free(batch)

    def prompt(question: str, chunk: str, closing: bool) -> tuple[list[int], list[int]]:
        text = scorer.render(verdict_messages(question, chunk))
        if not closing:
            text = text.replace(CLOSING, "")
        head = scorer.render(verdict_messages("\x00", chunk)).split("\x00", 1)[0]
        # the prefix's last token may merge with the question: left to the suffix
        full, pre = scorer._tokens(text), scorer._tokens(head)[:-1]
        assert full[: len(pre)] == pre
        return pre, full[len(pre) :]

    seconds: dict[tuple[bool, int, str], list[float]] = {}
    suffix_tokens: dict[tuple[bool, int], list[int]] = {}
    for question in asked:
        for closing in (True, False):
            for k in (1, 4, 8):
                split = [prompt(question, chunk, closing) for chunk in chunks[:k]]
                suffix_tokens.setdefault((closing, k), []).append(
                    round(statistics.mean(len(s) for _, s in split))
                )
                spent = 0.0
                for pre, suffix in split:  # as a check reads: the chunk's state alone in the context
                    llama_cpp.llama_memory_clear(own_memory, True)
                    decode([(0, 0, pre)], own)
                    start = time.perf_counter()
                    decode([(0, len(pre), suffix)], own)
                    spent += time.perf_counter() - start
                seconds.setdefault((closing, k, "one at a time"), []).append(spent)
                llama_cpp.llama_memory_clear(memory, True)  # every chunk in its own sequence
                for seq, (pre, _) in enumerate(split):
                    decode([(seq, 0, pre)])
                start = time.perf_counter()
                decode([(seq, len(pre), suffix) for seq, (pre, suffix) in enumerate(split)])
                seconds.setdefault((closing, k, "one batch"), []).append(time.perf_counter() - start)
    llama_cpp.llama_free(ctx)

    rows: list[dict[str, Any]] = []
    for closing in (True, False):
        for k in (1, 4, 8):
            alone = statistics.median(seconds[(closing, k, "one at a time")])
            batched = statistics.median(seconds[(closing, k, "one batch")])
            rows.append(
                {
                    "suffix": "shipped" if closing else "closing instruction moved before the document",
                    "chunks": k,
                    "suffix_tokens": round(statistics.median(suffix_tokens[(closing, k)])),
                    "one_at_a_time_s": round(alone, 3),
                    "one_batch_s": round(batched, 3),
                    "batch_x": round(batched / alone, 3),
                }
            )
    result = {
        **run_header("question_side"),
        "threads": threads,
        "model": scorer.name,
        "reps": len(asked),
        "chunk_words": WORDS,
        "documents": sorted(ids),
        "seconds": {f"{'shipped' if c else 'moved'} {k} {how}": v for (c, k, how), v in seconds.items()},
    }
    report(rows, result, args.out)


if __name__ == "__main__":
    main()
