"""Fixtures for the LlamaIndex integration tests: deterministic detectors, real MiniLM + FAISS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# li_testkit imports llama_index: import it inside fixtures so that this conftest loads
# (and the test modules skip themselves) when the integration is not installed.


@pytest.fixture
def coverage_detector() -> Any:
    from li_testkit import CoverageDetector

    return CoverageDetector()


@pytest.fixture
def slow_detector() -> Any:
    from li_testkit import CoverageDetector

    return CoverageDetector(delay=0.3)


@pytest.fixture
def failing_detector() -> Any:
    from li_testkit import FailingDetector

    return FailingDetector()


@pytest.fixture(scope="session")
def hf_embedding() -> Any:
    """The packaged MiniLM through llama-index-embeddings-huggingface (offline, local path)."""
    hf = pytest.importorskip(
        "llama_index.embeddings.huggingface", reason="needs llama-index-embeddings-huggingface"
    )
    from scopeguard.models import minilm_path

    return hf.HuggingFaceEmbedding(model_name=minilm_path(), device="cpu")


@pytest.fixture(scope="session")
def faiss_index(hf_embedding: Any) -> Any:
    """A real VectorStoreIndex on a FAISS store over the tiny corpus."""
    faiss = pytest.importorskip("faiss", reason="needs faiss-cpu")
    vs = pytest.importorskip(
        "llama_index.vector_stores.faiss", reason="needs llama-index-vector-stores-faiss"
    )
    from li_testkit import CORPUS
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode

    store = vs.FaissVectorStore(faiss_index=faiss.IndexFlatL2(384))
    nodes = [TextNode(text=t, id_=f"c{i}") for i, t in enumerate(CORPUS)]
    return VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=hf_embedding
    )


@pytest.fixture
def retriever(faiss_index: Any) -> Any:
    return faiss_index.as_retriever(similarity_top_k=1)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The packaged local GGUF behind a real llama.cpp server on 127.0.0.1; yields its base URL."""
    from scopeguard.testing import packaged_llama_server

    with packaged_llama_server(tmp_path_factory.mktemp("llama-server")) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def local_chat_model() -> Any:
    """The packaged local LLM (``from_spec("local")``), loaded once; skips when unavailable."""
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard import ScopeGuardError, from_spec

    try:
        return from_spec("local")
    except (ScopeGuardError, ImportError) as exc:
        pytest.skip(f"local LLM unavailable: {exc}")
