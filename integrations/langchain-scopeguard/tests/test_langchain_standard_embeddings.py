"""LangChain's own standard tests (``langchain-tests``) for SentenceTransformerEmbeddings, on the
packaged MiniLM (real model, offline)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")
pytest.importorskip("langchain_tests", reason="pip install './integrations/langchain-scopeguard[test]'")
pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")

from langchain_core.embeddings import Embeddings
from langchain_scopeguard import SentenceTransformerEmbeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from scopeguard.models import minilm_path


class _Suite:
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return SentenceTransformerEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"model": str(minilm_path())}


class TestSentenceTransformerEmbeddingsUnit(_Suite, EmbeddingsUnitTests):
    pass


@pytest.mark.slow
class TestSentenceTransformerEmbeddingsIntegration(_Suite, EmbeddingsIntegrationTests):
    @pytest.fixture
    def model(self, minilm_embeddings: Any) -> Embeddings:
        return minilm_embeddings  # the session's MiniLM, loaded once


def test_vectors_are_normalised_and_semantic(minilm_embeddings):
    import numpy as np

    rail, harbour = minilm_embeddings.embed_documents(["The railway opened in 1887.", "Boats land mackerel."])
    query = minilm_embeddings.embed_query("When did the railway open?")
    assert abs(np.linalg.norm(query) - 1.0) < 1e-5
    assert np.dot(query, rail) > np.dot(query, harbour)
