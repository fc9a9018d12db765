"""The verification loop's control flow with a scripted LLM and a tiny retriever."""

from __future__ import annotations

import pytest
from verify_helpers import CORPUS, TinyRetriever

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.prompts import render
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document
from scopeguard.verification import AnswerVerifier, VerificationResult

QUESTION = "What colour was the Zorbian lighthouse painted?"


def routed(answer: str = "It was painted green.", reader: str = "Green, in 1931.", verdict: str = "Yes"):
    """A scripted LLM that answers each of the three prompts by its role."""

    def reply(prompt: str) -> str:
        if "act as a classifier" in prompt:
            return verdict
        if "extracting answers" in prompt:
            return reader
        if "You are an expert in this field" in prompt:
            return answer
        raise AssertionError(f"unexpected prompt: {prompt[:80]}")

    return ScriptedChatModel(reply)


def test_generates_retrieves_with_question_plus_answer_and_classifies(tiny: TinyRetriever) -> None:
    llm = routed(verdict="Yes")
    result = AnswerVerifier(llm, retriever=tiny, k=2).verify(QUESTION, id="q1")
    assert isinstance(result, VerificationResult)
    assert result.verdict == "supported" and not result.is_hallucination
    assert result.id == "q1" and result.answer == "It was painted green."
    assert tiny.queries == [f"{QUESTION} It was painted green."] == [result.query]
    assert [e.id for e in result.evidence] == ["p1", "p3"]  # top-k, not only the first
    assert [e.rank for e in result.evidence] == [1, 2]
    assert result.compared == CORPUS[0].text  # the top passage is "Answer2" without a reader
    assert result.reader_answer is None and result.llm_calls == 2 and result.retriever == "tiny"
    prompts = [c.prompt for c in llm.calls]
    assert prompts[0] == render("verify_answer", question=QUESTION)
    assert prompts[1] == render(
        "verify_classify",
        question=QUESTION,
        llm_answer="It was painted green.",
        retriever_answer=CORPUS[0].text,
    )
    assert all(c.temperature == 0.0 for c in llm.calls)


def test_reader_extracts_before_comparing(tiny: TinyRetriever) -> None:
    llm = routed(verdict="No")
    result = AnswerVerifier(llm, retriever=tiny, reader=True).verify(QUESTION, "It was painted red.")
    assert result.verdict == "contradicted" and result.is_hallucination
    assert result.reader_answer == "Green, in 1931." == result.compared
    assert result.llm_calls == 2  # answer given: reader + classifier
    assert llm.calls[0].prompt == render("verify_reader", question=QUESTION, passage=CORPUS[0].text)
    assert "Answer2: Green, in 1931." in llm.calls[1].prompt


def test_passages_option_shows_several_passages(tiny: TinyRetriever) -> None:
    llm = routed(verdict="Not Related")
    result = AnswerVerifier(llm, retriever=tiny, k=3, passages=2).verify(QUESTION, "Green.")
    assert result.verdict == "not_related"
    assert CORPUS[0].text in result.compared and CORPUS[2].text in result.compared


def test_unparseable_classifier_reply_is_unknown(tiny: TinyRetriever) -> None:
    result = AnswerVerifier(routed(verdict="Both answers talk about lighthouses."), retriever=tiny).verify(
        QUESTION, "Green."
    )
    assert result.verdict == "unknown" and result.error
    assert result.rationale == "Both answers talk about lighthouses."


def test_empty_answer_and_no_hits_are_unknown_without_classifying(tiny: TinyRetriever) -> None:
    llm = routed(answer="   ")
    empty = AnswerVerifier(llm, retriever=tiny).verify(QUESTION)
    assert empty.verdict == "unknown" and "empty" in (empty.error or "")
    assert len(llm.calls) == 1
    llm2 = routed()
    none = AnswerVerifier(llm2, retriever=tiny).verify("Who?", "Xy.")  # no 3+ letter term in common
    assert none.verdict == "unknown" and "no passage" in (none.error or "")
    assert llm2.calls == []


def test_documents_source_is_split_and_indexed_with_bm25() -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    doc = Document(
        id="guide",
        text=(
            "Marlow pies are baked with quince. They are served cold. "
            "The Zorbian lighthouse was painted green in 1931. The guild chose the colour. "
            "Rope is stored in the old rope house."
        ),
    )
    llm = routed(verdict="Yes")
    result = AnswerVerifier(llm, passage_sentences=2).verify(
        QUESTION, "The lighthouse was painted green.", [doc]
    )
    assert result.verdict == "supported"
    assert result.evidence[0].id == "guide#p1"
    assert result.evidence[0].text.startswith("The Zorbian lighthouse was painted green in 1931.")
    assert result.retriever == "bm25"


async def test_async_twin_matches_sync(tiny: TinyRetriever) -> None:
    sync = AnswerVerifier(routed(verdict="No"), retriever=tiny, reader=True).verify(QUESTION, id="a")
    other = TinyRetriever("tiny")
    other.index(CORPUS)
    asyn = await AnswerVerifier(routed(verdict="No"), retriever=other, reader=True).averify(QUESTION, id="a")
    assert asyn.model_dump(exclude={"latency_ms"}) == sync.model_dump(exclude={"latency_ms"})
    assert asyn.llm_calls == 3


def test_bad_configuration_and_input(tiny: TinyRetriever) -> None:
    llm = routed()
    with pytest.raises(ConfigurationError, match="k must be"):
        AnswerVerifier(llm, k=0)
    with pytest.raises(ConfigurationError, match="passages must be between 1 and k=2"):
        AnswerVerifier(llm, k=2, passages=3)
    with pytest.raises(ConfigurationError, match="Retriever protocol"):
        AnswerVerifier(llm, retriever="bm25")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="nothing to verify against"):
        AnswerVerifier(llm).verify(QUESTION, "Green.")
    with pytest.raises(InputError, match="question is empty"):
        AnswerVerifier(llm, retriever=tiny).verify("  ", "Green.")
    with pytest.raises(InputError, match="no documents"):
        AnswerVerifier(llm).verify(QUESTION, "Green.", [])
    with pytest.raises(
        ConfigurationError, match="unknown retriever 'bm52'; valid names: bm25, dense, hybrid"
    ):
        AnswerVerifier(llm, documents_retriever="bm52").verify(QUESTION, "Green.", ["some text here"])


def test_result_round_trips_through_json(tiny: TinyRetriever) -> None:
    result = AnswerVerifier(routed(), retriever=tiny, reader=True).verify(QUESTION, id="q9")
    assert VerificationResult.model_validate_json(result.model_dump_json()) == result
