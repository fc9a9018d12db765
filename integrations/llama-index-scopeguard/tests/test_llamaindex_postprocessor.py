from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import CORPUS, IN_SCOPE, OUT_OF_SCOPE
from llama_index.core.llms import MockLLM
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from llama_index_scopeguard import ScopeGuardPostprocessor

from scopeguard import Guard, InputError, get_detector

NODES = [NodeWithScore(node=TextNode(text=t, id_=f"c{i}"), score=1.0 - i / 10) for i, t in enumerate(CORPUS)]


def test_set_granularity_drops_everything_out_of_scope(retriever, coverage_detector):
    pp = ScopeGuardPostprocessor(guard=Guard(detector=coverage_detector))
    nodes = retriever.retrieve(OUT_OF_SCOPE)
    assert len(nodes) == 1 and pp.postprocess_nodes(nodes, query_str=OUT_OF_SCOPE) == []
    nodes = retriever.retrieve(IN_SCOPE)
    (kept,) = pp.postprocess_nodes(nodes, query_str=IN_SCOPE)
    meta = kept.node.metadata["scopeguard"]
    assert meta["label"] == "in_scope" and meta["out_of_scope"] is False and kept.score == nodes[0].score
    # the verdict is hidden from what the LLM and the embedder see, and the stored node is untouched
    assert "scopeguard" not in kept.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "scopeguard" not in kept.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert "scopeguard" not in nodes[0].node.metadata


def test_document_granularity_and_annotate_only(coverage_detector):
    pp = ScopeGuardPostprocessor(guard=Guard(detector=coverage_detector), granularity="document")
    kept = pp.postprocess_nodes(NODES, query_str="When did the quarry at Carreg Ddu close?")
    assert [n.node.node_id for n in kept] == ["c2"]
    flag = ScopeGuardPostprocessor(
        guard=Guard(detector=coverage_detector), granularity="document", drop_out_of_scope=False
    )
    out = flag.postprocess_nodes(NODES, query_str="When did the quarry at Carreg Ddu close?")
    assert [n.node.metadata["scopeguard"]["label"] for n in out] == [
        "out_of_scope",
        "out_of_scope",
        "in_scope",
    ]


async def test_async_is_concurrent(slow_detector):
    pp = ScopeGuardPostprocessor(guard=Guard(detector=slow_detector), granularity="document")
    kept = await pp.apostprocess_nodes(NODES, query_str="Where do fishing boats land mackerel?")
    assert [n.node.node_id for n in kept] == ["c1"]
    assert slow_detector.max_in_flight == 3
    slow_detector.max_in_flight = 0
    set_pp = ScopeGuardPostprocessor(guard=Guard(detector=slow_detector))
    a, b = await asyncio.gather(
        set_pp.apostprocess_nodes(NODES[:1], query_str=IN_SCOPE),
        set_pp.apostprocess_nodes(NODES[:1], query_str=OUT_OF_SCOPE),
    )
    assert (len(a), len(b)) == (1, 0) and slow_detector.max_in_flight == 2


def test_failures_and_bad_input(failing_detector, coverage_detector):
    closed = ScopeGuardPostprocessor(guard=Guard(detector=failing_detector))
    assert closed.postprocess_nodes(NODES, query_str=IN_SCOPE) == []
    opened = ScopeGuardPostprocessor(guard=Guard(detector=failing_detector, on_error="fail_open"))
    out = opened.postprocess_nodes(NODES, query_str=IN_SCOPE)
    assert len(out) == 3 and out[0].node.metadata["scopeguard"]["label"] == "unknown"
    with pytest.raises(InputError, match="needs the query"):
        ScopeGuardPostprocessor(guard=Guard(detector=coverage_detector)).postprocess_nodes(NODES)


def test_in_a_stock_query_engine_with_the_lexical_detector(faiss_index):
    pp = ScopeGuardPostprocessor(guard=Guard(detector=get_detector("lexical")))
    engine = faiss_index.as_query_engine(similarity_top_k=1, node_postprocessors=[pp], llm=MockLLM())
    answered = engine.query(IN_SCOPE)
    assert len(answered.source_nodes) == 1
    assert answered.source_nodes[0].node.metadata["scopeguard"]["detector"] == "lexical"
    guarded = engine.query("What salary did the chief engineer earn?")
    assert guarded.source_nodes == []
