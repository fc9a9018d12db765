"""Pre-reading the nodes a LlamaIndex app indexes: the ``ScopeGuardPrereader`` ingestion step, and
``preread`` / ``preread_in_background`` on the post-processor and the guarded query engine (a real
``VectorStoreIndex`` with a node parser, mock embeddings, and a scripted reader that keeps what it
read)."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index_scopeguard", reason="pip install ./integrations/llama-index-scopeguard")

from li_testkit import CORPUS, IN_SCOPE
from llama_index.core import Document as LIDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index_scopeguard import GuardedQueryEngine, ScopeGuardPostprocessor, ScopeGuardPrereader

from scopeguard import Guard, PrereadReport
from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.testing import ScriptedPrefixScorer

# two sources, each split by the node parser into sentence-sized nodes: what the index retrieves
SOURCES = [LIDocument(text=" ".join(CORPUS[:2]), id_="coast"), LIDocument(text=CORPUS[2], id_="quarry")]


def _reading_guard(read_seconds: float = 0.0) -> tuple[Guard, ScriptedPrefixScorer]:
    scorer = ScriptedPrefixScorer(lambda prompt: -5.0, read_seconds=read_seconds)
    return Guard(detector=LogProbDetector(reader=scorer)), scorer


def _index(*transformations) -> VectorStoreIndex:  # type: ignore[no-untyped-def]
    splitter = SentenceSplitter(chunk_size=20, chunk_overlap=0, tokenizer=str.split)  # no tiktoken
    return VectorStoreIndex.from_documents(
        SOURCES, transformations=[splitter, *transformations], embed_model=MockEmbedding(embed_dim=8)
    )


def _read(scorer: ScriptedPrefixScorer, texts: list[str]) -> list[str]:
    return [text for text in texts if any(text in prefix for prefix in scorer.reads)]


def test_the_ingestion_step_prereads_the_nodes_as_they_are_indexed():
    guard, scorer = _reading_guard()
    index = _index(ScopeGuardPrereader(guard=guard))
    nodes = list(index.docstore.docs.values())
    assert len(nodes) > len(SOURCES)  # split: the nodes, not the source documents, were read
    assert _read(scorer, [n.get_content() for n in nodes]) == [n.get_content() for n in nodes]
    reads = len(scorer.reads)
    retrieved = index.as_retriever(similarity_top_k=len(nodes)).retrieve(IN_SCOPE)
    kept = ScopeGuardPostprocessor(guard=guard).postprocess_nodes(retrieved, query_str=IN_SCOPE)
    assert kept and kept[0].node.metadata["scopeguard"]["label"] == "in_scope"
    assert len(scorer.reads) == reads  # every retrieved node was read ahead: only the question now


def test_the_ingestion_step_can_read_in_the_background():
    guard, _ = _reading_guard(read_seconds=0.05)
    prereader = ScopeGuardPrereader(guard=guard, background=True)
    index = _index(prereader)
    (job,) = prereader.jobs
    assert job.wait(30) and job.error is None and job.read == len(index.docstore.docs)


def test_the_postprocessor_and_the_engine_preread_index_nodes():
    index = _index()
    nodes = list(index.docstore.docs.values())
    guard, scorer = _reading_guard()
    report = ScopeGuardPostprocessor(guard=guard).preread(nodes[:2])
    assert isinstance(report, PrereadReport) and report == 2 and report.documents == 2
    assert len(_read(scorer, [n.get_content() for n in nodes])) == 2
    engine = GuardedQueryEngine(retriever=index.as_retriever(), llm=MockLLM(), guard=guard)
    job = engine.preread_in_background(nodes)
    assert job.wait(30) and job.result == len(nodes)
    assert job.report is not None and job.report.documents == len(nodes)
    reads = len(scorer.reads)
    response = engine.query(IN_SCOPE)
    assert response.metadata["scopeguard"]["verdict"].label == "in_scope"
    assert len(scorer.reads) == reads
