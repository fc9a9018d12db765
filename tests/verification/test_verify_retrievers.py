"""The verifier builds its retrievers from the one registry (no second registry, no second fusion)."""

from __future__ import annotations

import pytest

import scopeguard.retrieval.fusion as fusion
import scopeguard.retrieval.registry as registry
import scopeguard.verification.hybrid as hybrid
from scopeguard.errors import ConfigurationError
from scopeguard.retrieval import TwoStageRetriever
from scopeguard.retrieval.rerank import DEFAULT_MONOT5
from scopeguard.verification import VERIFIER_RETRIEVERS, make_retriever


def test_one_implementation_of_fusion_and_no_second_registry() -> None:
    assert hybrid.HybridRetriever is fusion.HybridRetriever and hybrid.rrf_fuse is fusion.rrf_fuse
    listed = getattr(hybrid, "available_retrievers", registry.available_retrievers)
    assert listed is registry.available_retrievers and not hasattr(hybrid, "_FACTORIES")
    assert VERIFIER_RETRIEVERS == {"bm25": "bm25-msmarco", "dense": "dense", "hybrid": "hybrid"}


def test_neural_conditions_by_spec() -> None:
    neural = make_retriever("bm25+rerank:monot5")
    assert isinstance(neural, TwoStageRetriever)
    assert (neural.first.k1, neural.first.b) == (0.82, 0.68)  # type: ignore[attr-defined]
    assert neural.name == f"bm25+rerank:{DEFAULT_MONOT5}"
    preset = make_retriever("neural", model="sbert")
    assert isinstance(preset, TwoStageRetriever) and preset.first.name == "hybrid(bm25+sbert)"
    assert make_retriever(" hybrid ").name == "hybrid(bm25+minilm)"
    with pytest.raises(ConfigurationError, match="unknown retriever 'splade\\+rerank:monot5'; valid names"):
        make_retriever("splade+rerank:monot5")
