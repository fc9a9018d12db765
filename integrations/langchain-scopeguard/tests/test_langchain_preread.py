"""Pre-reading the chunks a LangChain app indexes: ``preread`` / ``preread_in_background`` on the
guarded retriever, the guarded chain and the compressor (a real ``InMemoryVectorStore``, fake
embeddings, and a scripted reader that keeps what it read)."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_scopeguard import GuardedRAG, ScopeGuardCompressor, ScopeGuardRetriever, rag_prompt
from lc_testkit import CORPUS, IN_SCOPE

from scopeguard import Guard, PrereadReport
from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.testing import ScriptedPrefixScorer, ScriptedVerdictScorer


def _indexed() -> tuple[InMemoryVectorStore, list[LCDocument]]:
    """The corpus's chunks, added to a real vector store as an app indexes them."""
    chunks = [LCDocument(page_content=text, metadata={"source": f"c{i}"}) for i, text in enumerate(CORPUS)]
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(chunks)
    return store, chunks


def _reading_guard(read_seconds: float = 0.0) -> tuple[Guard, ScriptedPrefixScorer]:
    scorer = ScriptedPrefixScorer(lambda prompt: -5.0, read_seconds=read_seconds)
    return Guard(detector=LogProbDetector(reader=scorer)), scorer


def _read(scorer: ScriptedPrefixScorer) -> list[str]:
    return [text for text in CORPUS if any(text in prefix for prefix in scorer.reads)]


def test_the_guarded_retriever_prereads_its_chunks_and_a_query_reads_nothing_more():
    store, chunks = _indexed()
    guard, scorer = _reading_guard()
    retriever = ScopeGuardRetriever(retriever=store.as_retriever(search_kwargs={"k": 3}), guard=guard)
    report = retriever.preread(chunks)
    assert isinstance(report, PrereadReport) and report == len(CORPUS) and report.documents == len(CORPUS)
    assert report.bytes_on_disk == 0  # the scripted reader keeps nothing on disk
    assert _read(scorer) == list(CORPUS)
    reads = len(scorer.reads)
    docs = retriever.invoke(IN_SCOPE)  # the store returns copies (with ids): the same page contents
    assert len(docs) == 3 and docs[0].metadata["scopeguard"]["label"] == "in_scope"
    assert len(scorer.reads) == reads  # every retrieved chunk was read ahead: only the question now
    assert retriever.preread([LCDocument(page_content="   ")]) == 0  # nothing to read


def test_the_guarded_chain_prereads_in_the_background():
    store, chunks = _indexed()
    guard, scorer = _reading_guard(read_seconds=0.05)
    rag = GuardedRAG(
        retriever=store.as_retriever(search_kwargs={"k": 1}),
        chain=rag_prompt() | FakeListChatModel(responses=["In 1887."]) | StrOutputParser(),
        guard=guard,
    )
    job = rag.preread_in_background(chunks)
    assert job.wait(30) and (job.read, job.result, job.error) == (len(CORPUS), len(CORPUS), None)
    reads = len(scorer.reads)
    assert rag.invoke(IN_SCOPE)["answer"] == "In 1887."
    assert len(scorer.reads) == reads


def test_the_compressor_prereads_and_a_reader_without_states_reads_nothing():
    _, chunks = _indexed()
    guard, scorer = _reading_guard()
    assert ScopeGuardCompressor(guard=guard).preread(chunks[:2]) == 2 and _read(scorer) == list(CORPUS[:2])
    plain = Guard(detector=LogProbDetector(reader=ScriptedVerdictScorer(lambda prompt: -5.0)))
    assert ScopeGuardCompressor(guard=plain).preread(chunks) == 0  # no prefix cache: nothing kept
