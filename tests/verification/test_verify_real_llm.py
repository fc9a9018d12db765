"""One dev question through the whole loop with the real packaged Qwen 0.5B behind a llama.cpp server."""

from __future__ import annotations

from pathlib import Path

import pytest

from scopeguard.data import load_dataset
from scopeguard.llm.registry import from_spec
from scopeguard.verification import AnswerVerifier, dataset_passages, make_retriever

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_real_llm_verifies_one_dev_question(llama_server: str, dev_data_dir: Path) -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    ds = load_dataset(dev_data_dir)
    retriever = make_retriever("bm25")
    retriever.index(dataset_passages(ds))
    llm = from_spec("openai:qwen2.5-coder-0.5b", base_url=llama_server, api_key="sk-local")
    verifier = AnswerVerifier(
        llm, retriever=retriever, reader=True, k=3, answer_max_tokens=48, reader_max_tokens=64
    )
    question = next(q for q in ds.questions if q.label == "in_scope")
    result = verifier.verify(question.question, id=question.id)
    assert result.answer  # the model answered (Figure 2 prompt)
    assert result.query == f"{question.question} {result.answer}"
    assert len(result.evidence) == 3 and all("#p" in e.id for e in result.evidence)
    # the combined query finds the question's own document among the top passages
    assert any(e.id.startswith(f"{question.doc_id}#p") for e in result.evidence)
    assert result.reader_answer and result.compared == result.reader_answer
    assert result.llm_calls == 3 and result.rationale
    assert result.verdict in ("supported", "contradicted", "not_related", "unknown")
    assert (result.verdict == "unknown") == (result.error is not None)
