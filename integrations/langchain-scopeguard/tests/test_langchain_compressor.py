from __future__ import annotations

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.documents import Document as LCDocument
from langchain_scopeguard import ScopeGuardCompressor
from lc_testkit import CORPUS

from scopeguard import Guard

DOCS = [LCDocument(page_content=t, id=f"c{i}") for i, t in enumerate(CORPUS)]


def test_keeps_only_documents_that_cover_the_query(coverage_detector):
    comp = ScopeGuardCompressor(guard=Guard(detector=coverage_detector))
    kept = comp.compress_documents(DOCS, "When did the quarry at Carreg Ddu close?")
    assert [d.id for d in kept] == ["c2"]
    assert kept[0].metadata["scopeguard"]["label"] == "in_scope"
    assert DOCS[2].metadata == {}  # inputs are not mutated
    assert comp.compress_documents(DOCS, "Who owned the quarry at Carreg Ddu?") == []


async def test_async_checks_documents_concurrently(slow_detector):
    comp = ScopeGuardCompressor(guard=Guard(detector=slow_detector))
    kept = await comp.acompress_documents(DOCS, "Where do fishing boats land mackerel?")
    assert [d.id for d in kept] == ["c1"]
    assert slow_detector.max_in_flight == 3


def test_set_granularity_and_annotate_only(coverage_detector):
    comp = ScopeGuardCompressor(
        guard=Guard(detector=coverage_detector), granularity="set", drop_out_of_scope=False
    )
    out = comp.compress_documents(DOCS, "When did the quarry at Carreg Ddu close?")
    assert len(out) == 3 and {d.metadata["scopeguard"]["label"] for d in out} == {"in_scope"}


def test_failure_drops_everything_when_fail_closed(failing_detector):
    comp = ScopeGuardCompressor(guard=Guard(detector=failing_detector))
    assert comp.compress_documents(DOCS, "When did the quarry close?") == []
    comp = ScopeGuardCompressor(guard=Guard(detector=failing_detector, on_error="fail_open"))
    assert len(comp.compress_documents(DOCS, "When did the quarry close?")) == 3


def test_with_contextual_compression_retriever(faiss_retriever, coverage_detector):
    ccr = pytest.importorskip("langchain_classic.retrievers", reason="needs langchain-classic")
    retriever = ccr.ContextualCompressionRetriever(
        base_compressor=ScopeGuardCompressor(guard=Guard(detector=coverage_detector)),
        base_retriever=faiss_retriever,
    )
    assert len(retriever.invoke("When did the Brindle Valley railway open?")) == 1
    assert retriever.invoke("Who was the chief engineer of the Brindle Valley railway?") == []
