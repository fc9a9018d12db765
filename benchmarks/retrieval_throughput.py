"""Retrieval throughput: index and query speed of each offline retriever; rank-bm25 vs bm25s.

    python benchmarks/retrieval_throughput.py                  # defaults below
    python benchmarks/retrieval_throughput.py --sizes 1000,10000 --queries 200 --repeats 3

Three parts, each timed ``--repeats`` times (medians reported):

1. BM25 implementations on synthetic corpora (Zipf-distributed vocabulary, ~250 tokens per
   document, queries of 4-8 words drawn from the same distribution): index seconds, queries per
   second, and whether the top-10 rankings and scores of ``bm25`` (rank-bm25, Lucene formula) and
   ``bm25s`` agree (identical id lists, max absolute score difference).
2. The same agreement check on the dev dataset (real questions against their documents), if found.
3. Dense retrievers that run offline (``minilm``, ``sbert`` = packaged all-mpnet-base-v2) on the
   dev documents and questions, embedding cache off: documents and queries per second.

Prints a table and writes ``benchmarks/results/retrieval_throughput.json`` (numbers only, no text).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.retrieval import get_retriever
from scopeguard.retrieval.bm25 import BM25Retriever, BM25sRetriever
from scopeguard.types import Document

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "eloq-gold-dev"
RESULT = Path(__file__).resolve().parent / "results" / "retrieval_throughput.json"


def _synthetic(n_docs: int, n_queries: int, seed: int) -> tuple[list[Document], list[str]]:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(30_000)])
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    p /= p.sum()
    docs = [
        Document(id=f"s{i}", text=" ".join(rng.choice(vocab, size=int(rng.integers(150, 350)), p=p)))
        for i in range(n_docs)
    ]
    queries = [" ".join(rng.choice(vocab[50:5000], size=int(rng.integers(4, 9)))) for _ in range(n_queries)]
    return docs, queries


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _agreement(a: BM25Retriever, b: BM25sRetriever, queries: list[str]) -> dict[str, float]:
    same, max_diff = 0, 0.0
    for q in queries:
        ha, hb = a.search(q, 10), b.search(q, 10)
        same += [h.document.id for h in ha] == [h.document.id for h in hb]
        for x, y in zip(ha, hb, strict=False):
            max_diff = max(max_diff, abs(x.score - y.score))
        max_diff = max(max_diff, float(np.max(np.abs(a.scores(q) - b.scores(q)))))
    return {"top10_identical_share": same / len(queries), "max_abs_score_diff": max_diff}


def bench_bm25(docs: list[Document], queries: list[str], repeats: int) -> dict[str, Any]:
    row: dict[str, Any] = {"n_docs": len(docs), "n_queries": len(queries)}
    built: dict[str, Any] = {}
    for name, cls in (("bm25", BM25Retriever), ("bm25s", BM25sRetriever)):
        index_s, query_s = [], []
        for _ in range(repeats):
            r = cls()
            index_s.append(_timed(lambda r=r: r.index(docs))[0])
            query_s.append(_timed(lambda r=r: r.search_batch(queries, k=10))[0])
            built[name] = r
        row[name] = {
            "index_s_median": statistics.median(index_s),
            "index_docs_per_s": len(docs) / statistics.median(index_s),
            "queries_per_s": len(queries) / statistics.median(query_s),
        }
    row["speedup_query_bm25s_over_bm25"] = row["bm25s"]["queries_per_s"] / row["bm25"]["queries_per_s"]
    row["agreement"] = _agreement(built["bm25"], built["bm25s"], queries)
    return row


def bench_dense(name: str, docs: list[Document], queries: list[str], repeats: int) -> dict[str, Any]:
    r = get_retriever(name, cache=False, show_progress=False)
    r.index(docs[:2])  # load the model once, outside the timings
    index_s, query_s = [], []
    for _ in range(repeats):
        index_s.append(_timed(lambda: r.index(docs))[0])
        query_s.append(_timed(lambda: r.search_batch(queries, k=10))[0])
    return {
        "retriever": name,
        "n_docs": len(docs),
        "n_queries": len(queries),
        "index_docs_per_s": len(docs) / statistics.median(index_s),
        "queries_per_s": len(queries) / statistics.median(query_s),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="synthetic corpus sizes for BM25")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dense", default="minilm,sbert", help="offline dense retrievers ('' to skip)")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("SCOPEGUARD_DEV_DATA", DEFAULT_DATA)))
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    result: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "repeats": args.repeats,
        "bm25_synthetic": [],
        "bm25_dev": None,
        "dense_dev": [],
    }
    print(f"{'corpus':>14} {'impl':>6} {'index s':>9} {'docs/s':>9} {'queries/s':>10}")
    for size in (int(s) for s in args.sizes.split(",") if s.strip()):
        docs, queries = _synthetic(size, args.queries, seed=size)
        row = bench_bm25(docs, queries, args.repeats)
        result["bm25_synthetic"].append(row)
        for impl in ("bm25", "bm25s"):
            r = row[impl]
            print(
                f"{'synthetic ' + str(size):>14} {impl:>6} {r['index_s_median']:9.3f} "
                f"{r['index_docs_per_s']:9.0f} {r['queries_per_s']:10.1f}"
            )
        speedup = row["speedup_query_bm25s_over_bm25"]
        print(f"{'':>14} agreement: {row['agreement']}  bm25s query speed-up x{speedup:.1f}")

    if (args.data / "questions.jsonl").is_file():
        from scopeguard.data import load_dataset

        ds = load_dataset(args.data)
        dev_docs = list(ds.documents.values())
        dev_q = [q.question for q in ds.questions]
        row = bench_bm25(dev_docs, dev_q, args.repeats)
        result["bm25_dev"] = row
        print(f"{'dev ' + str(len(dev_docs)):>14} agreement: {row['agreement']}")
        for name in (n for n in args.dense.split(",") if n.strip()):
            d = bench_dense(name, dev_docs, dev_q, args.repeats)
            result["dense_dev"].append(d)
            where = f"dev {len(dev_docs)}"
            print(f"{where:>14} {name:>6} {'':>9} {d['index_docs_per_s']:9.1f} {d['queries_per_s']:10.1f}")
    else:
        print(f"dev data not found at {args.data}: dense part skipped")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
