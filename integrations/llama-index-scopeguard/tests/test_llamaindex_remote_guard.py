"""The LlamaIndex integration with a remote guard: a GuardClient against a real ``scopeguard serve``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")
pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")

from llama_index.core.schema import NodeWithScore, TextNode
from llama_index_scopeguard import ScopeGuardPostprocessor

from scopeguard.client import GuardClient
from scopeguard.serve import ServeConfig
from scopeguard.testing import running_guard_server

NODES = [
    NodeWithScore(node=TextNode(text="The railway opened in 1887.", id_="rail"), score=0.9),
    NodeWithScore(node=TextNode(text="The harbour has a pier.", id_="harbour"), score=0.5),
]


@pytest.fixture(scope="module")
def remote() -> Iterator[GuardClient]:
    with running_guard_server(ServeConfig(detector="lexical", port=0)) as url, GuardClient(url) as client:
        yield client


def test_postprocessor_with_a_remote_guard(remote: GuardClient) -> None:
    per_node = ScopeGuardPostprocessor(guard=remote, granularity="document")
    kept = per_node.postprocess_nodes(NODES, query_str="When was the railway opened?")
    assert [n.node.node_id for n in kept] == ["rail"]
    assert kept[0].node.metadata["scopeguard"]["label"] == "in_scope"
    # everything dropped: the server's policy (clarify) answers in a node of its own
    (policy,) = ScopeGuardPostprocessor(guard=remote).postprocess_nodes(
        NODES[:1], query_str="Who was the chief engineer of the railway company?"
    )
    meta = policy.node.metadata["scopeguard"]
    assert meta["action"] == "clarified" and "engineer" in meta["policy_response"]


async def test_async_postprocessor_with_a_remote_guard(remote: GuardClient) -> None:
    pp = ScopeGuardPostprocessor(guard=remote, granularity="document")
    kept = await pp.apostprocess_nodes(NODES, query_str="When was the railway opened?")
    assert [n.node.node_id for n in kept] == ["rail"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_guarded_query_engine_with_a_remote_guard(
    remote: GuardClient, retriever: Any, use_async: bool
) -> None:
    """The engine's check and its policy response come from the server (detector ``lexical``,
    policy ``clarify``); the in-scope answer from the engine's own synthesizer."""
    from li_testkit import IN_SCOPE

    out_of_scope = "Who was the chief engineer of the railway company?"  # lexical: 0.75 out of scope
    from llama_index.core.llms import MockLLM
    from llama_index_scopeguard import GuardedQueryEngine

    from scopeguard import Action

    engine = GuardedQueryEngine(retriever=retriever, guard=remote, llm=MockLLM())
    answered = await engine.aquery(IN_SCOPE) if use_async else engine.query(IN_SCOPE)
    meta = answered.metadata["scopeguard"]  # type: ignore[index]
    assert meta["action"] == Action.ANSWERED and meta["verdict"].detector == "lexical"
    assert len(answered.source_nodes) == 1
    refused = await engine.aquery(out_of_scope) if use_async else engine.query(out_of_scope)
    meta = refused.metadata["scopeguard"]  # type: ignore[index]
    assert meta["action"] == Action.CLARIFIED and meta["verdict"].label == "out_of_scope"
    assert "engineer" in str(refused)
