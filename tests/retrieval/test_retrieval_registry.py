"""The retriever registry: names, dense:PATH, model prompts, and clear errors for missing models."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.retrieval import available_retrievers, get_retriever, register_retriever
from scopeguard.retrieval.bm25 import BM25Retriever
from scopeguard.retrieval.dense import DenseRetriever, SentenceEncoder


def test_names() -> None:
    assert {"bm25", "bm25s", "sbert", "minilm", "bge", "stella", "linq"} <= set(available_retrievers())


def test_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ConfigurationError) as exc:
        get_retriever("bm52")
    msg = str(exc.value)
    assert "bm52" in msg and "bm25" in msg and "sbert" in msg and "dense:NAME_OR_PATH" in msg


def test_options_are_passed_and_bad_options_named() -> None:
    r = get_retriever("bm25", k1=1.2, b=0.5)
    assert isinstance(r, BM25Retriever) and (r.k1, r.b) == (1.2, 0.5)
    with pytest.raises(ConfigurationError, match="bad options for retriever 'bm25'"):
        get_retriever("bm25", nonsense=1)


def test_model_prompts_follow_the_model_cards() -> None:
    bge = get_retriever("bge")
    assert isinstance(bge, DenseRetriever)
    assert bge.encoder.model_name == "BAAI/bge-large-en-v1.5"
    assert bge.encoder.query_prompt == "Represent this sentence for searching relevant passages: "
    assert bge.encoder.document_prompt == ""
    stella = get_retriever("stella")
    assert isinstance(stella, DenseRetriever)
    assert stella.encoder.query_prompt_name == "s2p_query" and stella.encoder.document_prompt_name is None
    assert stella.encoder.trust_remote_code
    linq = get_retriever("linq", task="Find the news story")
    assert isinstance(linq, DenseRetriever)
    assert linq.encoder.query_prompt == "Instruct: Find the news story\nQuery: "
    sbert = get_retriever("sbert")
    assert isinstance(sbert, DenseRetriever) and sbert.name == "sbert"
    assert sbert.encoder.model_name == "sentence-transformers/all-mpnet-base-v2"


def test_prompt_name_resolves_from_the_model_config() -> None:
    enc = SentenceEncoder("any", query_prompt_name="s2p_query")
    enc._model = SimpleNamespace(prompts={"s2p_query": "Instruct: find passages.\nQuery: ", "s2s_query": "x"})
    assert enc._prompt(enc.query_prompt, enc.query_prompt_name) == "Instruct: find passages.\nQuery: "
    with pytest.raises(ConfigurationError, match="s2p_query, s2s_query"):
        enc._prompt("", "nope")


def test_dense_spec() -> None:
    r = get_retriever("dense:some/model", index_type="hnsw")
    assert isinstance(r, DenseRetriever)
    assert r.name == "dense:some/model" and r.encoder.model_name == "some/model" and r.index_type == "hnsw"
    with pytest.raises(ConfigurationError, match="needs a sentence-transformers model"):
        get_retriever("dense:")
    with pytest.raises(ConfigurationError, match="index_type"):
        get_retriever("dense:x", index_type="lsh")


def test_register_retriever() -> None:
    register_retriever("test-bm25-strict", lambda **kw: BM25Retriever(k1=2.0, **kw))
    assert "test-bm25-strict" in available_retrievers()
    r = get_retriever("test-bm25-strict")
    assert isinstance(r, BM25Retriever) and r.k1 == 2.0
    with pytest.raises(ConfigurationError):
        register_retriever("a:b", BM25Retriever)


def test_missing_model_offline_is_a_model_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    pytest.importorskip("sentence_transformers")
    from scopeguard.types import Document

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    r = get_retriever("bge", cache_dir=tmp_path / "emb")
    with pytest.raises(ModelError) as exc:
        r.index([Document(id="a", text="some passage")])
    assert "BAAI/bge-large-en-v1.5" in str(exc.value) and "HF_HUB_OFFLINE" in str(exc.value)
    missing = get_retriever(f"dense:{tmp_path / 'no-such-model'}", cache_dir=tmp_path / "emb")
    with pytest.raises(ModelError, match="no-such-model"):
        missing.index([Document(id="a", text="some passage")])


def test_public_surface() -> None:
    import subprocess
    import sys

    import scopeguard.retrieval as retrieval

    assert retrieval.__all__ == sorted(retrieval.__all__)
    assert all(hasattr(retrieval, n) for n in retrieval.__all__)
    assert {"Hit", "Retriever", "get_retriever", "run_study"} <= set(retrieval.__all__)
    # importing the package loads no heavy backend
    code = (
        "import sys, scopeguard.retrieval; "
        "print(','.join(m for m in ('faiss', 'sentence_transformers', 'torch', 'matplotlib', 'rank_bm25', "
        "'bm25s') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
