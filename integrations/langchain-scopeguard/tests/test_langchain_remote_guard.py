"""The LangChain integration with a remote guard: a GuardClient against a real ``scopeguard serve``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")
pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")

from langchain_core.documents import Document as LCDocument
from langchain_core.runnables import RunnableLambda
from langchain_scopeguard import ScopeGuardCompressor, ScopeGuardRetriever

from scopeguard.client import GuardClient
from scopeguard.serve import ServeConfig
from scopeguard.testing import running_guard_server

DOCS = [
    LCDocument(page_content="The railway opened in 1887."),
    LCDocument(page_content="The harbour has a pier."),
]


@pytest.fixture(scope="module")
def remote() -> Iterator[GuardClient]:
    with running_guard_server(ServeConfig(detector="lexical", port=0)) as url, GuardClient(url) as client:
        yield client


def test_retriever_with_a_remote_guard(remote: GuardClient) -> None:
    retriever = ScopeGuardRetriever(retriever=RunnableLambda(lambda q: DOCS[:1]), guard=remote)
    (doc,) = retriever.invoke("When was the railway opened?")
    assert (
        doc.metadata["scopeguard"]["label"] == "in_scope"
        and doc.metadata["scopeguard"]["detector"] == "lexical"
    )
    dropping = ScopeGuardRetriever(
        retriever=RunnableLambda(lambda q: DOCS[:1]), guard=remote, drop_out_of_scope=True
    )
    assert dropping.invoke("Who was the chief engineer of the railway company?") == []


async def test_compressor_per_document_with_a_remote_guard(remote: GuardClient) -> None:
    compressor = ScopeGuardCompressor(guard=remote)
    kept = await compressor.acompress_documents(DOCS, "When was the railway opened?")
    assert [d.page_content for d in kept] == ["The railway opened in 1887."]
    assert kept[0].metadata["scopeguard"]["out_of_scope"] is False


def test_guarded_rag_with_a_remote_guard(remote: GuardClient) -> None:
    """The chain's check and its policy response come from the server (detector ``lexical``,
    policy ``clarify``); the in-scope answer from the chain, given the retrieved context."""
    from langchain_scopeguard import GuardedRAG

    from scopeguard import Action

    seen: list[dict[str, str]] = []

    def answer(inputs: dict[str, str]) -> str:
        seen.append(inputs)
        return "It opened in 1887."

    chain = RunnableLambda(answer)
    rag = GuardedRAG(retriever=RunnableLambda(lambda q: DOCS[:1]), chain=chain, guard=remote)
    out = rag.invoke("When was the railway opened?")
    assert out["action"] == Action.ANSWERED and out["answer"] == "It opened in 1887."
    assert out["verdict"].label == "in_scope" and out["verdict"].detector == "lexical"
    assert "1887" in seen[0]["context"]
    out = rag.invoke("Who was the chief engineer of the railway company?")
    assert out["action"] == Action.CLARIFIED and "engineer" in out["answer"]
    assert len(seen) == 1  # the chain did not run for the out-of-scope question
