"""Scale benchmark: a synthetic corpus of 100k documents through BM25, MiniLM and the ELOQ generator.

    python benchmarks/scale.py                      # 100k documents (under 10 minutes on 2 cores)
    python benchmarks/scale.py --docs 20000         # smaller, while developing

The corpus is generated here, deterministically (``--seed``): documents of about 150 words in
sentences of 8-16 pseudo-words drawn from a Zipf-distributed word list (short words commonest,
as in English, so MiniLM sees about as many word pieces as for English text), so no data set text is used.
Measured, one row per stage:

1. BM25 (``bm25s`` and ``bm25`` = rank-bm25, both through the retriever registry): index build on all
   documents, then top-10 queries per second (``--queries`` queries of 4-8 words).
2. Embedding throughput of MiniLM (the packaged all-MiniLM-L6-v2, cache off) on a ``--embed-sample``
   sample on this CPU; the time for the whole corpus is EXTRAPOLATED from it (labelled so).
3. Generation through the fake LLM of ``benchmarks/generation_scale.py`` (``EloqChatModel``: ELOQ-shaped
   replies after ``--latency`` seconds of non-blocking wait per call, like a remote endpoint) on
   ``--gen-docs`` documents at ``--concurrency``: documents per second, LLM calls and (whitespace)
   tokens per document, which docs/guides/scale-out.md ("Running 1M documents") prices.
4. Resume: the same generation again on the finished folder (every document skipped): its cost per
   document and extrapolated to the whole corpus.
5. Generation over HTTP: the same generator through ``OpenAIChatModel`` (the openai SDK, retries,
   adaptive concurrency) against the fake server (``python -m scopeguard._fake_openai``, ELOQ-shaped
   replies after ``--latency`` seconds) in its own process on 127.0.0.1, on ``--http-docs`` documents:
   what the client side (SDK, HTTP, JSON) adds on this CPU, and its CPU seconds per document.

Peak memory is this process's maximum resident set after each stage (``resource.getrusage``).
Prints a table and writes ``benchmarks/results/scale.json`` (numbers only).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _report import report
from generation_scale import _peak_rss_mb, _size_mb

from scopeguard.generation import GenerationConfig, Generator
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.retrieval import get_retriever
from scopeguard.retrieval.dense import SentenceEncoder
from scopeguard.testing import EloqChatModel
from scopeguard.types import Document

RESULT = Path(__file__).resolve().parent / "results" / "scale.json"
_SYLLABLES = tuple(c + v for c in "bcdfghklmnprstvwz" for v in "aeiou")


def word_list(size: int, seed: int) -> list[str]:
    """``size`` distinct pseudo-words of 1-3 syllables, shortest first (frequent words are short)."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = dict.fromkeys(_SYLLABLES)
    while len(words) < size:
        n = int(rng.integers(2, 4))
        words["".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), size=n))] = None
    return sorted(words, key=len)[:size]


def synthetic_corpus(n_docs: int, *, seed: int = 0, words: int = 150) -> list[Document]:
    """``n_docs`` documents of at least ``words`` words in sentences (Zipf-distributed vocabulary)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(word_list(20_000, seed))
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    p /= p.sum()
    draws = rng.choice(len(vocab), size=(n_docs, words + 16), p=p)
    cuts = rng.integers(8, 17, size=(n_docs, words // 8 + 2)).cumsum(axis=1)
    docs = []
    for i in range(n_docs):
        tokens = vocab[draws[i]].tolist()
        sentences, start = [], 0
        for end in cuts[i]:
            sentences.append(" ".join(tokens[start:end]).capitalize() + ".")
            start = int(end)
            if start >= words:
                break
        docs.append(Document(id=f"syn{i:07d}", text=" ".join(sentences)))
    return docs


def _queries(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed + 1)
    vocab = word_list(20_000, seed)[20:5000]  # neither the commonest words nor unseen ones
    return [" ".join(rng.choice(vocab, size=int(rng.integers(4, 9)))) for _ in range(n)]


def _row(stage: str, items: int, seconds: float, unit: str, note: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "stage": stage,
        "items": items,
        "seconds": round(seconds, 2),
        "rate": f"{items / seconds:.1f} {unit}/s" if seconds > 0 else "n/a",
        "peak_rss_mb": _peak_rss_mb(),
        "note": note,
        **extra,
    }


def bench_bm25(docs: list[Document], queries: list[str], name: str) -> list[dict[str, Any]]:
    retriever = get_retriever(name)
    started = time.perf_counter()
    retriever.index(docs)
    build = time.perf_counter() - started
    started = time.perf_counter()
    hits = retriever.search_batch(queries, k=10)
    search = time.perf_counter() - started
    found = sum(bool(h) for h in hits)
    return [
        _row(f"{name}: index build", len(docs), build, "docs"),
        _row(f"{name}: top-10 queries", len(queries), search, "queries", f"{found} with hits"),
    ]


def bench_embedding(docs: list[Document], sample: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed + 2)
    picked = [docs[int(i)] for i in rng.choice(len(docs), size=min(sample, len(docs)), replace=False)]
    encoder = SentenceEncoder("minilm", cache=False, show_progress=False)
    encoder.encode_documents([picked[0].text])  # load the model outside the timing
    started = time.perf_counter()
    encoder.encode_documents([d.text for d in picked])
    seconds = time.perf_counter() - started
    rate = len(picked) / seconds
    return _row(
        "minilm: embed documents",
        len(picked),
        seconds,
        "docs",
        f"EXTRAPOLATED to {len(docs)} docs: {len(docs) / rate / 60:.1f} min on this CPU",
        extrapolated_corpus_s=round(len(docs) / rate, 1),
    )


def bench_generation(
    docs: list[Document], corpus_size: int, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    work: Path = args.work
    if work.exists():
        shutil.rmtree(work)
    llm = EloqChatModel(latency=args.latency, keep_calls=False)
    config = GenerationConfig(mode=args.mode)  # type: ignore[arg-type]
    runs = []
    for _ in range(2):  # fresh, then the same again on the finished folder (everything resumed)
        gen = Generator(llm, config=config, concurrency=args.concurrency, progress=False)
        started = time.perf_counter()
        summary = gen.run(docs, work)
        runs.append((summary, time.perf_counter() - started))
    (fresh, fresh_s), (resumed, resumed_s) = runs
    done = max(1, fresh.docs_done_run)
    u = fresh.usage_run
    per_doc = {
        "llm_calls_per_doc": round(u.calls / done, 2),
        "prompt_tokens_per_doc": round(u.prompt_tokens / done, 1),
        "completion_tokens_per_doc": round(u.completion_tokens / done, 1),
        "questions_per_doc": round((fresh.oos_kept + fresh.in_scope) / done, 2),
    }
    ideal = args.concurrency / (u.calls / done * args.latency)
    rows = [
        _row(
            f"generate ({args.mode}, {args.latency * 1000:.0f} ms fake LLM, {args.concurrency} in flight)",
            fresh.docs_done_run,
            fresh_s,
            "docs",
            f"ideal {ideal:.1f} docs/s; {per_doc['llm_calls_per_doc']} calls/doc",
            folder_mb=_size_mb(work),
        ),
        _row(
            "resume: re-open the finished folder",
            resumed.docs_resumed,
            resumed_s,
            "docs",
            f"{1000 * resumed_s / max(1, resumed.docs_resumed):.2f} ms/doc; EXTRAPOLATED to {corpus_size} "
            f"docs: {corpus_size * resumed_s / max(1, resumed.docs_resumed):.0f} s",
            llm_calls=resumed.usage_run.calls,
        ),
    ]
    return rows, {**per_doc, "ideal_docs_per_s": round(ideal, 1)}


def bench_generation_http(docs: list[Document], args: argparse.Namespace) -> dict[str, Any]:
    """Generation through the openai SDK against the fake server in a child process."""
    work: Path = args.work.with_name(args.work.name + "-http")
    if work.exists():
        shutil.rmtree(work)
    cmd = [sys.executable, "-m", "scopeguard._fake_openai", "--port", "0", "--latency", str(args.latency)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        if not base_url.startswith("http"):
            raise SystemExit(f"the fake server did not start: {base_url!r}")
        llm = OpenAIChatModel("gpt-4o-mini", base_url=base_url, api_key="fake")
        gen = Generator(
            llm,
            config=GenerationConfig(mode=args.mode),  # type: ignore[arg-type]
            concurrency=args.concurrency,
            progress=False,
        )
        cpu, started = time.process_time(), time.perf_counter()
        summary = gen.run(docs, work)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        server.terminate()
        server.wait(timeout=30)
    done = max(1, summary.docs_done_run)
    calls = summary.usage_run.calls
    ideal = args.concurrency / (calls / done * args.latency)
    return _row(
        f"generate over HTTP (openai SDK -> fake server process, {args.concurrency} in flight)",
        summary.docs_done_run,
        seconds,
        "docs",
        f"ideal {ideal:.1f} docs/s; client CPU {1000 * cpu / done:.0f} ms/doc",
        client_cpu_ms_per_doc=round(1000 * cpu / done, 1),
        llm_calls=calls,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--embed-sample", type=int, default=2000)
    ap.add_argument("--gen-docs", type=int, default=400)
    ap.add_argument("--http-docs", type=int, default=200, help="documents generated over HTTP (0: skip)")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per fake LLM call")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--mode", default="faithful", choices=("faithful", "efficient"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-scale"))
    args = ap.parse_args()
    started = time.perf_counter()
    docs = synthetic_corpus(args.docs, seed=args.seed)
    words = [len(d.text.split()) for d in docs[:1000]]
    rows = [_row("synthetic corpus", len(docs), time.perf_counter() - started, "docs")]
    queries = _queries(args.queries, args.seed)
    for name in ("bm25s", "bm25"):
        rows += bench_bm25(docs, queries, name)
    rows.append(bench_embedding(docs, args.embed_sample, args.seed))
    gen_rows, per_doc = bench_generation(docs[: args.gen_docs], len(docs), args)
    rows += gen_rows
    if args.http_docs:
        rows.append(bench_generation_http(docs[: args.http_docs], args))
    result = {
        "benchmark": "scale",
        "docs": args.docs,
        "words_per_doc_mean": round(float(np.mean(words)), 1),
        "queries": args.queries,
        "embed_sample": args.embed_sample,
        "gen_docs": args.gen_docs,
        "http_docs": args.http_docs,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "mode": args.mode,
        "generation_per_doc": per_doc,
        "total_s": round(time.perf_counter() - started, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, load average "
        f"{os.getloadavg()[0]:.1f} at the end, no GPU",
        "note": "synthetic corpus generated by the script (seeded); embedding and resume times for the "
        "whole corpus are EXTRAPOLATED from the sample; generation tokens are the fake's whitespace "
        "word counts of the real prompts (a BPE tokenizer gives about 1.3 tokens per English word); "
        "peak_rss_mb is the process maximum so far (monotonic)",
    }
    report(rows, result, RESULT)


if __name__ == "__main__":
    main()
