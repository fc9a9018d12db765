"""LangChain's own standard tests (``langchain-tests``) for ScopeGuardRetriever, plus the option
pass-through they exercise, over a real in-memory vector store with real MiniLM embeddings."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")
pytest.importorskip("langchain_tests", reason="pip install './integrations/langchain-scopeguard[test]'")
pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_scopeguard import ScopeGuardRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests
from lc_testkit import CORPUS, IN_SCOPE, OUT_OF_SCOPE
from pydantic import ValidationError

from scopeguard import ConfigurationError, Guard


@pytest.fixture(scope="module")
def vector_store(minilm_embeddings: Any) -> InMemoryVectorStore:
    store = InMemoryVectorStore(minilm_embeddings)
    store.add_documents([LCDocument(page_content=text, id=f"c{i}") for i, text in enumerate(CORPUS)])
    return store


class TestScopeGuardRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _store(self, vector_store: InMemoryVectorStore) -> None:
        self.store = vector_store

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return ScopeGuardRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": self.store.as_retriever(), "guard": Guard(detector="lexical")}

    @property
    def retriever_query_example(self) -> str:
        return IN_SCOPE


def test_k_and_search_kwargs_reach_a_vector_store_retriever(vector_store):
    guard = Guard(detector="lexical")
    r = ScopeGuardRetriever(retriever=vector_store.as_retriever(), guard=guard, k=2)
    docs = r.invoke(IN_SCOPE)
    assert len(docs) == 2 and "1887" in docs[0].page_content
    assert all(d.metadata["scopeguard"]["detector"] == "lexical" for d in docs)
    assert len(r.invoke(IN_SCOPE, k=3)) == 3  # the call's k wins over the constructor's
    only_harbour = ScopeGuardRetriever(
        retriever=vector_store.as_retriever(),
        guard=guard,
        search_kwargs={"k": 3, "filter": lambda d: "harbour" in d.page_content},
    )
    assert {d.id for d in only_harbour.invoke(IN_SCOPE)} == {"c0", "c1"}


def test_k_reaches_a_retriever_field_or_cuts_a_plain_runnable(faiss_retriever):
    r = ScopeGuardRetriever(retriever=faiss_retriever, guard=Guard(detector="lexical"), k=3)
    assert len(r.invoke(IN_SCOPE)) == 3  # FaissRetriever.k = 3 on a copy
    assert faiss_retriever.k == 1  # the caller's retriever is untouched
    docs = [LCDocument(page_content=text) for text in CORPUS]
    plain = ScopeGuardRetriever(retriever=RunnableLambda(lambda q: docs), guard=Guard(detector="lexical"))
    assert [d.page_content for d in plain.invoke(IN_SCOPE, k=2)] == list(CORPUS[:2])
    with pytest.raises(ConfigurationError, match="filter"):
        plain.invoke(IN_SCOPE, filter={"year": 1887})


def test_unknown_constructor_arguments_are_rejected(faiss_retriever):
    with pytest.raises(ConfigurationError, match="did you mean 'drop_out_of_scope'"):
        ScopeGuardRetriever(retriever=faiss_retriever, guard=Guard(detector="lexical"), drop_out_of_scop=True)
    with pytest.raises(ValidationError):
        ScopeGuardRetriever(retriever=faiss_retriever, guard=Guard(detector="lexical"), k=0)


class _VerdictRuns(BaseCallbackHandler):
    def __init__(self) -> None:
        self.runs: list[tuple[dict[str, Any], list[str], Any]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
        if kw.get("name") == "ScopeGuardVerdict":
            self.runs.append((kw.get("metadata") or {}, kw.get("tags") or [], kw.get("parent_run_id")))


def test_verdict_is_traced_in_run_metadata_and_tags(faiss_retriever, coverage_detector):
    handler = _VerdictRuns()
    guard = Guard(detector=coverage_detector)
    r = ScopeGuardRetriever(retriever=faiss_retriever, guard=guard, drop_out_of_scope=True)
    assert r.invoke(OUT_OF_SCOPE, config={"callbacks": [handler]}) == []  # nothing left in the output...
    ((metadata, tags, parent),) = handler.runs  # ...but the trace says why
    assert metadata["scopeguard_label"] == "out_of_scope" and metadata["scopeguard_detector"] == "coverage"
    assert metadata["scopeguard_out_of_scope"] is True and metadata["scopeguard_score"] > 0.5
    assert "scopeguard_stage" in metadata and "scopeguard:out_of_scope" in tags
    assert parent is not None
