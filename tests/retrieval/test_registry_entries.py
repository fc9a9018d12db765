"""One retriever registry: the MS MARCO BM25 settings, dense/hybrid, neural and two-stage specs."""

from __future__ import annotations

import pytest

from scopeguard.errors import ConfigurationError
from scopeguard.retrieval import HybridRetriever, TwoStageRetriever, available_retrievers, get_retriever
from scopeguard.retrieval.bm25 import BM25Retriever
from scopeguard.retrieval.dense import DenseRetriever
from scopeguard.retrieval.registry import BM25_MSMARCO, is_retriever_spec
from scopeguard.retrieval.rerank import DEFAULT_MONOT5, CrossEncoderReranker, MonoT5Reranker


def test_the_verification_entries_are_registered() -> None:
    assert {"bm25-msmarco", "dense", "hybrid", "neural"} <= set(available_retrievers())
    assert BM25_MSMARCO == {"k1": 0.82, "b": 0.68}


def test_bm25_msmarco_parameters_are_explicit_and_bm25_keeps_pyserinis() -> None:
    msmarco = get_retriever("bm25-msmarco")
    assert isinstance(msmarco, BM25Retriever) and (msmarco.k1, msmarco.b) == (0.82, 0.68)
    assert msmarco.name == "bm25"  # run folders and reports keep the name they had
    plain = get_retriever("bm25")
    assert isinstance(plain, BM25Retriever) and (plain.k1, plain.b) == (0.9, 0.4)
    assert get_retriever("bm25-msmarco", b=0.5).b == 0.5  # type: ignore[attr-defined]


def test_dense_takes_a_registered_name_or_any_model() -> None:
    default = get_retriever("dense")
    assert isinstance(default, DenseRetriever) and default.name == "minilm"
    bge = get_retriever("dense", model="bge")
    assert isinstance(bge, DenseRetriever) and bge.encoder.query_prompt.startswith("Represent this")
    other = get_retriever("dense", model="some/model")
    assert isinstance(other, DenseRetriever) and other.name == "dense:some/model"


def test_hybrid_fuses_bm25_msmarco_and_dense_with_explicit_parameters() -> None:
    hybrid = get_retriever("hybrid")
    assert isinstance(hybrid, HybridRetriever)
    bm25, dense = hybrid.retrievers
    assert isinstance(bm25, BM25Retriever) and (bm25.k1, bm25.b) == (0.82, 0.68)
    assert isinstance(dense, DenseRetriever) and dense.name == "minilm"
    assert (hybrid.depth, hybrid.rrf_k, hybrid.weights) == (100, 60.0, (1.0, 1.0))
    assert hybrid.name == "hybrid(bm25+minilm)"
    tuned = get_retriever("hybrid", model="sbert", depth=50, rrf_k=10, weights=(2.0, 1.0))
    assert isinstance(tuned, HybridRetriever) and tuned.name == "hybrid(bm25+sbert)"
    assert (tuned.depth, tuned.rrf_k, tuned.weights) == (50, 10, (2.0, 1.0))


def test_neural_is_hybrid_reranked_by_monot5_and_routes_options() -> None:
    neural = get_retriever("neural", model="sbert", candidates=20, batch_size=4)
    assert isinstance(neural, TwoStageRetriever) and neural.candidates == 20
    assert isinstance(neural.first, HybridRetriever) and neural.first.name == "hybrid(bm25+sbert)"
    assert isinstance(neural.reranker, MonoT5Reranker)
    assert neural.reranker.model_name == DEFAULT_MONOT5 and neural.reranker.batch_size == 4
    assert neural.name == f"hybrid(bm25+sbert)+rerank:{DEFAULT_MONOT5}"


def test_rerank_specs() -> None:
    two = get_retriever("bm25+rerank:cross-encoder:some/ce", candidates=5)
    assert isinstance(two, TwoStageRetriever) and isinstance(two.reranker, CrossEncoderReranker)
    assert two.reranker.model_name == "some/ce" and isinstance(two.first, BM25Retriever)
    assert two.first.k1 == 0.9
    assert is_retriever_spec("dense:x+rerank:monot5") and is_retriever_spec("hybrid")
    assert not is_retriever_spec("splade+rerank:monot5")
    with pytest.raises(ConfigurationError, match="must be FIRST\\+rerank:RERANKER"):
        get_retriever("bm25+rerank:")
    with pytest.raises(ConfigurationError, match="unknown retriever 'splade'"):
        get_retriever("splade+rerank:monot5")
    with pytest.raises(ConfigurationError, match="bad options for retriever 'bm25'"):
        get_retriever("bm25+rerank:monot5", nonsense=1)
    with pytest.raises(ConfigurationError, match="without ':' or '\\+'"):
        from scopeguard.retrieval import register_retriever

        register_retriever("a+b", BM25Retriever)
