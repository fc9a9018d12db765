"""Retrieval: the Retriever protocol, BM25 and dense (FAISS) backends, and the retrieval study.

>>> from scopeguard.retrieval import get_retriever
>>> r = get_retriever("bm25")  # or bm25s, sbert, minilm, bge, stella, linq, dense:PATH, hybrid...
>>> r.index(documents); hits = r.search("who won?", k=5)
>>> neural = get_retriever("bm25-msmarco+rerank:monot5")  # a first stage, its top 100 reranked

Heavy libraries (rank-bm25, bm25s, sentence-transformers, faiss, transformers, matplotlib) load on
first use.
"""

from __future__ import annotations

from scopeguard.retrieval.base import Hit, Retriever, retrieve
from scopeguard.retrieval.bm25 import BM25Retriever, BM25sRetriever
from scopeguard.retrieval.dense import DenseRetriever, SentenceEncoder
from scopeguard.retrieval.embedding_cache import EmbeddingCache
from scopeguard.retrieval.fusion import HybridRetriever, rrf_fuse
from scopeguard.retrieval.registry import available_retrievers, get_retriever, register_retriever
from scopeguard.retrieval.report import write_study_report
from scopeguard.retrieval.rerank import (
    CrossEncoderReranker,
    MonoT5Reranker,
    Reranker,
    TwoStageRetriever,
    available_rerankers,
    get_reranker,
)
from scopeguard.retrieval.study import (
    RankedQuestion,
    RetrieverResult,
    StudyConfig,
    StudyReport,
    StudyResult,
    run_study,
    study,
)

__all__ = [
    "BM25Retriever",
    "BM25sRetriever",
    "CrossEncoderReranker",
    "DenseRetriever",
    "EmbeddingCache",
    "Hit",
    "HybridRetriever",
    "MonoT5Reranker",
    "RankedQuestion",
    "Reranker",
    "Retriever",
    "RetrieverResult",
    "SentenceEncoder",
    "StudyConfig",
    "StudyReport",
    "StudyResult",
    "TwoStageRetriever",
    "available_rerankers",
    "available_retrievers",
    "get_reranker",
    "get_retriever",
    "register_retriever",
    "retrieve",
    "rrf_fuse",
    "run_study",
    "study",
    "write_study_report",
]
