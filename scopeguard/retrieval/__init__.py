"""Retrieval: the Retriever protocol, BM25 and dense (FAISS) backends, and the retrieval study.

>>> from scopeguard.retrieval import get_retriever
>>> r = get_retriever("bm25")  # or bm25s, sbert, minilm, bge, stella, linq, dense:PATH
>>> r.index(documents); hits = r.search("who won?", k=5)

Heavy libraries (rank-bm25, bm25s, sentence-transformers, faiss, matplotlib) load on first use.
"""

from __future__ import annotations

from scopeguard.retrieval.base import Hit, Retriever
from scopeguard.retrieval.bm25 import BM25Retriever, BM25sRetriever
from scopeguard.retrieval.dense import DenseRetriever, SentenceEncoder
from scopeguard.retrieval.embedding_cache import EmbeddingCache
from scopeguard.retrieval.registry import available_retrievers, get_retriever, register_retriever
from scopeguard.retrieval.report import write_report
from scopeguard.retrieval.study import RankedQuestion, RetrieverResult, StudyResult, run_study

__all__ = [
    "BM25Retriever",
    "BM25sRetriever",
    "DenseRetriever",
    "EmbeddingCache",
    "Hit",
    "RankedQuestion",
    "Retriever",
    "RetrieverResult",
    "SentenceEncoder",
    "StudyResult",
    "available_retrievers",
    "get_retriever",
    "register_retriever",
    "run_study",
    "write_report",
]
