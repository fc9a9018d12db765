from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import CORPUS, IN_SCOPE, OUT_OF_SCOPE, record_events
from llama_index.core.llms import MockLLM
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from llama_index_scopeguard import ScopeGuardPostprocessor, ScopeGuardVerdictEvent

from scopeguard import Guard, InputError, get_detector

NODES = [NodeWithScore(node=TextNode(text=t, id_=f"c{i}"), score=1.0 - i / 10) for i, t in enumerate(CORPUS)]


def test_set_granularity_drops_everything_out_of_scope(retriever, coverage_detector):
    pp = ScopeGuardPostprocessor(guard=Guard(detector=coverage_detector))
    nodes = retriever.retrieve(OUT_OF_SCOPE)
    assert len(nodes) == 1
    (policy,) = pp.postprocess_nodes(nodes, query_str=OUT_OF_SCOPE)  # the retrieved node is gone...
    assert policy.node.node_id != nodes[0].node.node_id and "railway" not in policy.node.get_content()
    meta = policy.node.metadata["scopeguard"]  # ...replaced by the (clarify) policy's response
    assert meta["label"] == "out_of_scope" and meta["action"] == "clarified" and meta["replaced_nodes"] == 1
    assert policy.node.get_content() == meta["policy_response"] and "engineer" in meta["policy_response"]
    assert "scopeguard" not in policy.node.get_content(metadata_mode=MetadataMode.LLM)
    bare = ScopeGuardPostprocessor(guard=Guard(detector=coverage_detector), respond_with_policy=False)
    assert bare.postprocess_nodes(nodes, query_str=OUT_OF_SCOPE) == []
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
    assert slow_detector.max_in_flight == 2
    assert a[0].node.node_id == "c0" and b[0].node.metadata["scopeguard"]["action"] == "clarified"


def test_failures_and_bad_input(failing_detector, coverage_detector):
    closed = ScopeGuardPostprocessor(guard=Guard(detector=failing_detector, policy="refuse"))
    (policy,) = closed.postprocess_nodes(NODES, query_str=IN_SCOPE)
    meta = policy.node.metadata["scopeguard"]
    assert meta["failed_closed"] is True and meta["action"] == "refused" and meta["replaced_nodes"] == 3
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
    question = "What salary did the chief engineer earn?"
    with record_events() as events:
        guarded = engine.query(question)
    (node,) = guarded.source_nodes  # not an "Empty Response" indistinguishable from an empty index
    meta = node.node.metadata["scopeguard"]
    assert meta["label"] == "out_of_scope" and meta["detector"] == "lexical"
    assert meta["policy_response"] == node.node.get_content() and str(guarded) != "Empty Response"
    (event,) = [e for e in events if isinstance(e, ScopeGuardVerdictEvent)]
    assert (event.query, event.component, event.label) == (
        question,
        "ScopeGuardPostprocessor",
        "out_of_scope",
    )
    assert event.span_id is not None  # sent inside the query's span


def test_flag_policy_keeps_the_nodes(coverage_detector):
    pp = ScopeGuardPostprocessor(guard=Guard(detector=coverage_detector, policy="flag"))
    out = pp.postprocess_nodes(NODES[:1], query_str=OUT_OF_SCOPE)
    assert [n.node.node_id for n in out] == ["c0"] and out[0].node.metadata["scopeguard"]["out_of_scope"]
