"""The fakes shipped in scopeguard.testing behave as documented (users test their pipelines with them)."""

from __future__ import annotations

import asyncio

import pytest

from scopeguard import Document, Guard, Verdict
from scopeguard.errors import ConfigurationError, LLMConnectionError
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.retrieval.base import Retriever
from scopeguard.testing import (
    EloqChatModel,
    InMemoryRetriever,
    ScriptedChatModel,
    ScriptedDetector,
    eloq_reply,
    invented_document,
)

DOC = Document(id="d1", text="The Kestrel ferry carries 180 passengers and crosses in 35 minutes.")


def test_scripted_detector_by_question_labels_scores_and_errors() -> None:
    det = ScriptedDetector(
        {
            "a?": "in_scope",
            "b?": 0.8,
            "c?": None,
            "d?": LLMConnectionError("down", endpoint="http://127.0.0.1:9"),
            "e?": Verdict(label="out_of_scope", score=0.6, rationale="given"),
        },
        name="mine",
        uncovered=("the shipyard",),
        llm_calls=2,
    )
    a = det.detect("a?", DOC)
    assert (a.label, a.score, a.detector, a.llm_calls) == ("in_scope", None, "mine", 2)
    b = det.detect("b?", DOC)
    assert (b.label, b.score, b.uncovered) == ("out_of_scope", 0.8, ("the shipyard",))
    assert b.rationale.startswith("mine says")
    assert det.detect("c?", DOC).label == "unknown"
    with pytest.raises(LLMConnectionError):
        det.detect("d?", DOC)
    assert det.detect("e?", DOC).rationale == "given"
    with pytest.raises(ConfigurationError, match="no verdict scripted for 'z\\?'"):
        det.detect("z?", DOC)
    assert det.questions == ["a?", "b?", "c?", "d?", "e?", "z?"] and det.calls == 6


def test_scripted_detector_sequence_threshold_and_async() -> None:
    det = ScriptedDetector([0.2, 0.4, 0.9], threshold=0.3)
    assert [det.detect("q?", DOC).label for _ in range(2)] == ["in_scope", "out_of_scope"]
    assert asyncio.run(det.adetect("q?", DOC)).score == 0.9
    with pytest.raises(ConfigurationError, match="ran out"):
        det.detect("q?", DOC)


def test_scripted_detector_drives_a_guard() -> None:
    det = ScriptedDetector(lambda q: "out_of_scope" if "shipyard" in q else "in_scope")
    llm = ScriptedChatModel(["180 passengers."])
    assert Guard(detector=det, policy="refuse", llm=llm).answer("Who owns the shipyard?", [DOC]).action != (
        Guard(detector=det, policy="refuse", llm=llm).answer("How many passengers?", [DOC]).action
    )


def test_in_memory_retriever_ranks_by_shared_words() -> None:
    docs = [
        Document(id="p1", text="The Zorbian lighthouse was painted green."),
        Document(id="p2", text="Marlow pies are baked with quince."),
        Document(id="p3", text="The lighthouse guild meets on Tuesday beside the Zorbian lighthouse."),
    ]
    r = InMemoryRetriever()
    assert isinstance(r, Retriever) and r.name == "in-memory"
    r.index(docs)
    hits = r.search("Who painted the Zorbian lighthouse?", k=5)
    assert [(h.document.id, h.score, h.rank) for h in hits] == [("p1", 4.0, 1), ("p3", 3.0, 2)]
    assert r.search("Zorbian", k=1)[0].document.id == "p1"  # ties keep index order
    assert r.search("xy?") == []  # no shared word of 3+ letters: no hit
    assert [len(h) for h in r.search_batch(["quince pies", "nothing here"], k=3)] == [1, 0]
    assert r.queries[0] == "Who painted the Zorbian lighthouse?" and len(r.queries) == 5


def test_eloq_reply_answers_each_generator_prompt_and_refuses_others() -> None:
    judge = "Question: Does it ANSWERABLE?\nThe answer is: Yes or No"
    assert eloq_reply(judge).endswith("The answer is: No")
    assert eloq_reply(judge.replace("ANSWERABLE", "fly")).endswith("The answer is: Yes")
    with pytest.raises(ConfigurationError, match="unexpected prompt"):
        eloq_reply("Tell me a joke.")
    assert 170 <= len(invented_document("harbour").split()) <= 200


def test_eloq_chat_model_runs_the_generator(tmp_path) -> None:  # type: ignore[no-untyped-def]
    llm = EloqChatModel(latency=0.001)
    gen = Generator(llm, config=GenerationConfig(mode="efficient"), progress=False)
    summary = gen.run([{"doc_id": "h", "text": invented_document("harbour")}], tmp_path)
    # efficient mode: 4 facts remain after removal, the one with ANSWERABLE is filtered out
    assert (summary.docs_done, summary.oos_kept, summary.oos_filtered, summary.in_scope) == (1, 4, 1, 3)
    assert llm.requests == summary.usage_run.calls
    quiet = EloqChatModel(keep_calls=False, latency=0.001)
    Generator(quiet, config=GenerationConfig(mode="efficient"), progress=False).run(
        [{"doc_id": "h", "text": invented_document("harbour")}], tmp_path / "quiet"
    )
    assert quiet.calls == []
