from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.documents import Document as LCDocument
from langchain_core.runnables import RunnableLambda
from langchain_scopeguard import ScopeGuardRetriever
from lc_testkit import IN_SCOPE, OUT_OF_SCOPE, RunRecorder
from pydantic import ValidationError

from scopeguard import DetectionError, Guard, get_detector


def test_annotates_verdict_and_keeps_documents(faiss_retriever, coverage_detector):
    r = ScopeGuardRetriever(retriever=faiss_retriever, guard=Guard(detector=coverage_detector))
    docs = r.invoke(OUT_OF_SCOPE)
    assert len(docs) == 1 and "railway" in docs[0].page_content
    meta = docs[0].metadata["scopeguard"]
    assert meta["label"] == "out_of_scope" and meta["out_of_scope"] is True
    assert set(meta["uncovered"]) == {"chief", "engineer"}
    assert docs[0].metadata["score"] > 0  # the inner retriever's metadata survives

    docs = r.invoke(IN_SCOPE)
    assert docs[0].metadata["scopeguard"]["label"] == "in_scope"


def test_drops_out_of_scope_results(faiss_retriever, coverage_detector):
    r = ScopeGuardRetriever(
        retriever=faiss_retriever, guard=Guard(detector=coverage_detector), drop_out_of_scope=True
    )
    assert r.invoke(OUT_OF_SCOPE) == []
    assert len(r.invoke(IN_SCOPE)) == 1


def test_per_document_granularity_keeps_only_covering_documents(coverage_detector):
    docs = [
        LCDocument(page_content="The railway opened in 1887."),
        LCDocument(page_content="The harbour has a breakwater."),
    ]
    inner = RunnableLambda(lambda q: docs)
    r = ScopeGuardRetriever(
        retriever=inner,
        guard=Guard(detector=coverage_detector),
        granularity="document",
        drop_out_of_scope=True,
    )
    out = r.invoke("When was the railway opened?")
    assert [d.page_content for d in out] == ["The railway opened in 1887."]
    with pytest.raises(ValidationError):
        ScopeGuardRetriever(retriever=inner, guard=Guard(detector=coverage_detector), granularity="page")


def test_inner_retriever_runs_as_child(faiss_retriever, coverage_detector):
    rec = RunRecorder()
    r = ScopeGuardRetriever(retriever=faiss_retriever, guard=Guard(detector=coverage_detector))
    r.invoke(IN_SCOPE, config={"callbacks": [rec]})
    (outer, outer_parent), (_inner, inner_parent) = rec.retrievers
    assert outer_parent is None and inner_parent == outer


async def test_async_path_is_concurrent_and_propagates_callbacks(faiss_retriever, slow_detector):
    rec = RunRecorder()
    r = ScopeGuardRetriever(retriever=faiss_retriever, guard=Guard(detector=slow_detector))
    a, b = await asyncio.gather(
        r.ainvoke(IN_SCOPE, config={"callbacks": [rec]}), r.ainvoke(OUT_OF_SCOPE, config={"callbacks": [rec]})
    )
    assert slow_detector.max_in_flight == 2
    assert a[0].metadata["scopeguard"]["label"] == "in_scope"
    assert b[0].metadata["scopeguard"]["label"] == "out_of_scope"
    parents = {run for run, parent in rec.retrievers if parent is None}
    assert len(parents) == 2 and all(p in parents for _, p in rec.retrievers if p is not None)


def test_detector_failure_follows_on_error(faiss_retriever, failing_detector):
    closed = ScopeGuardRetriever(
        retriever=faiss_retriever, guard=Guard(detector=failing_detector), drop_out_of_scope=True
    )
    assert closed.invoke(IN_SCOPE) == []
    opened = ScopeGuardRetriever(
        retriever=faiss_retriever,
        guard=Guard(detector=failing_detector, on_error="fail_open"),
        drop_out_of_scope=True,
    )
    (doc,) = opened.invoke(IN_SCOPE)
    meta = doc.metadata["scopeguard"]
    assert meta["label"] == "unknown" and "down" in meta["error"] and meta["failed_closed"] is False
    raising = ScopeGuardRetriever(
        retriever=faiss_retriever, guard=Guard(detector=failing_detector, on_error="raise")
    )
    with pytest.raises(DetectionError):
        raising.invoke(IN_SCOPE)


def test_with_the_lexical_detector(faiss_retriever):
    r = ScopeGuardRetriever(retriever=faiss_retriever, guard=Guard(detector=get_detector("lexical")))
    (doc,) = r.invoke(IN_SCOPE)
    assert doc.metadata["scopeguard"]["label"] == "in_scope"
    assert doc.metadata["scopeguard"]["detector"] == "lexical"
    (doc,) = r.invoke("What salary did the chief engineer earn?")
    assert doc.metadata["scopeguard"]["label"] == "out_of_scope"


def test_public_surface():
    import langchain_scopeguard

    assert all(hasattr(langchain_scopeguard, name) for name in langchain_scopeguard.__all__)
    assert {"GuardedRAG", "ScopeGuardRetriever", "ScopeGuardCompressor", "ScopeGuardChatModel"} <= set(
        langchain_scopeguard.__all__
    )
