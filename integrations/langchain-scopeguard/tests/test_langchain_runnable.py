from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda
from langchain_scopeguard import GuardedRAG, ScopeGuardChatModel, rag_prompt
from lc_testkit import IN_SCOPE, OUT_OF_SCOPE, RunRecorder
from pydantic import ValidationError

from scopeguard import Action, DetectionError, Guard, InputError, Verdict
from scopeguard.testing import ScriptedChatModel

ANSWER = "It opened in 1887."


def _chain(answer: str = ANSWER):
    return rag_prompt() | FakeListChatModel(responses=[answer] * 10) | StrOutputParser()


def test_in_scope_is_answered_by_the_chain_with_the_retrieved_context(faiss_retriever, coverage_detector):
    scripted = ScriptedChatModel(lambda prompt: ANSWER)
    chain = rag_prompt() | ScopeGuardChatModel(llm=scripted) | StrOutputParser()
    rag = GuardedRAG(retriever=faiss_retriever, chain=chain, guard=Guard(detector=coverage_detector))
    out = rag.invoke(IN_SCOPE)
    assert out["action"] == Action.ANSWERED and out["answer"] == ANSWER
    assert isinstance(out["verdict"], Verdict) and out["verdict"].label == "in_scope"
    assert out["failed_closed"] is False and out["question"] == IN_SCOPE
    (call,) = scripted.calls
    assert "Brindle Valley railway opened in 1887" in call.prompt and IN_SCOPE in call.prompt


def test_out_of_scope_gets_the_policy_not_the_chain(faiss_retriever, coverage_detector):
    never = RunnableLambda(lambda _: pytest.fail("the chain must not run for an out-of-scope question"))
    rag = GuardedRAG(
        retriever=faiss_retriever, chain=never, guard=Guard(detector=coverage_detector, policy="clarify")
    )
    out = rag.invoke({"question": OUT_OF_SCOPE})
    assert out["action"] == Action.CLARIFIED
    assert "chief" in out["answer"] and "engineer" in out["answer"]  # clarify names the uncovered words
    assert out["verdict"].label == "out_of_scope" and len(out["documents"]) == 1


def test_defuse_uses_the_guards_llm(faiss_retriever, coverage_detector):
    llm = ScriptedChatModel(lambda prompt: "The document does not say who the engineer was.")
    rag = GuardedRAG(
        retriever=faiss_retriever,
        chain=_chain(),
        guard=Guard(detector=coverage_detector, policy="defuse", llm=llm),
    )
    out = rag.invoke(OUT_OF_SCOPE)
    assert out["action"] == Action.DEFUSED and "does not say" in out["answer"]
    assert "step by step" in llm.calls[0].prompt.lower()  # the Zero-shot-CoT template


def test_stream_yields_chain_chunks_in_scope_and_one_policy_chunk_otherwise(
    faiss_retriever, coverage_detector
):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector))
    chunks = list(rag.stream(IN_SCOPE))
    assert chunks[0]["verdict"].label == "in_scope"
    answers = [c["answer"] for c in chunks if "answer" in c]
    assert len(answers) > 1 and "".join(answers) == ANSWER  # FakeListChatModel streams per character
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    assert total["answer"] == ANSWER and total["action"] == Action.ANSWERED

    chunks = list(rag.stream(OUT_OF_SCOPE))
    answers = [c for c in chunks if "answer" in c]
    assert len(answers) == 1 and answers[0]["action"] == Action.CLARIFIED


async def test_astream_and_abatch(faiss_retriever, slow_detector):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=slow_detector))
    text = "".join([c.get("answer", "") async for c in rag.astream(IN_SCOPE)])
    assert text == ANSWER
    outs = await rag.abatch([IN_SCOPE, OUT_OF_SCOPE])
    assert [o["action"] for o in outs] == [Action.ANSWERED, Action.CLARIFIED]
    assert slow_detector.max_in_flight == 2  # abatch ran both detections concurrently


def test_batch(faiss_retriever, coverage_detector):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector))
    outs = rag.batch([IN_SCOPE, OUT_OF_SCOPE, IN_SCOPE])
    assert [o["action"] for o in outs] == [Action.ANSWERED, Action.CLARIFIED, Action.ANSWERED]


async def test_ainvoke_overlaps_and_callbacks_nest(faiss_retriever, slow_detector):
    rec = RunRecorder()
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=slow_detector))
    cfg = {"callbacks": [rec]}
    a, b = await asyncio.gather(rag.ainvoke(IN_SCOPE, cfg), rag.ainvoke(OUT_OF_SCOPE, cfg))
    assert slow_detector.max_in_flight == 2
    assert (a["action"], b["action"]) == (Action.ANSWERED, Action.CLARIFIED)
    roots = {run for name, run, parent in rec.chains if name == "GuardedRAG" and parent is None}
    assert len(roots) == 2
    checks = [parent for name, _, parent in rec.chains if name == "ScopeGuardCheck"]
    assert len(checks) == 2 and set(checks) == roots
    assert {parent for _, parent in rec.retrievers} == roots


def test_sync_callbacks_see_the_retriever_as_child(faiss_retriever, coverage_detector):
    rec = RunRecorder()
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector))
    rag.invoke(IN_SCOPE, config={"callbacks": [rec]})
    ((root_name, root, root_parent),) = [c for c in rec.chains if c[2] is None]
    assert root_name == "GuardedRAG" and root_parent is None
    assert [parent for _, parent in rec.retrievers] == [root]


@pytest.mark.parametrize(
    ("on_error", "action", "closed"),
    [("fail_closed", Action.REFUSED, True), ("fail_open", Action.ANSWERED, False)],
)
def test_detector_failure_follows_on_error(faiss_retriever, failing_detector, on_error, action, closed):
    guard = Guard(detector=failing_detector, policy="refuse", on_error=on_error)
    out = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=guard).invoke(IN_SCOPE)
    assert out["action"] == action and out["failed_closed"] is closed
    assert out["verdict"].label == "unknown" and "down" in out["verdict"].error


def test_detector_failure_raises_when_asked(faiss_retriever, failing_detector):
    guard = Guard(detector=failing_detector, on_error="raise")
    with pytest.raises(DetectionError):
        GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=guard).invoke(IN_SCOPE)


def test_no_documents_is_out_of_scope(coverage_detector):
    rag = GuardedRAG(
        retriever=RunnableLambda(lambda q: []),
        chain=_chain(),
        guard=Guard(detector=coverage_detector, policy="refuse"),
    )
    out = rag.invoke(IN_SCOPE)
    assert out["action"] == Action.REFUSED and out["verdict"].rationale == "no documents were retrieved"


def test_bad_input_and_configuration(faiss_retriever, coverage_detector):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector))
    with pytest.raises(InputError, match="'question'"):
        rag.invoke({"query": IN_SCOPE})
    with pytest.raises(InputError, match="empty"):
        rag.invoke("   ")
    with pytest.raises(ValidationError, match="needs chain"):
        GuardedRAG(retriever=faiss_retriever, guard=Guard(detector=coverage_detector))


def test_without_chain_the_guards_llm_answers(faiss_retriever, coverage_detector):
    llm = ScriptedChatModel(lambda prompt: ANSWER)
    rag = GuardedRAG(retriever=faiss_retriever, guard=Guard(detector=coverage_detector, llm=llm))
    assert rag.invoke(IN_SCOPE)["answer"] == ANSWER
    assert "".join(c.get("answer", "") for c in rag.stream(IN_SCOPE)) == ANSWER


def test_composes_in_lcel(faiss_retriever, coverage_detector):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector))
    assert (rag | RunnableLambda(lambda out: out["answer"].upper())).invoke(IN_SCOPE) == ANSWER.upper()
    assert "".join(rag.pick("answer").stream(IN_SCOPE)) == ANSWER
    schema = rag.get_output_schema().model_json_schema()
    assert set(schema["$defs"]["GuardedOutput"]["properties"]) == {
        "question",
        "documents",
        "verdict",
        "failed_closed",
        "action",
        "answer",
    }


async def test_flag_policy_answers_with_the_chain_and_flags(faiss_retriever, coverage_detector):
    rec = RunRecorder()
    rag = GuardedRAG(
        retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector, policy="flag")
    )
    out = rag.invoke(OUT_OF_SCOPE)
    assert out["action"] == Action.FLAGGED and out["answer"] == ANSWER
    out = await rag.ainvoke(OUT_OF_SCOPE, {"callbacks": [rec]})
    assert out["action"] == Action.FLAGGED and out["answer"] == ANSWER
    (root,) = [run for name, run, parent in rec.chains if parent is None]
    (policy,) = [run for name, run, parent in rec.chains if name == "ScopeGuardPolicy" and parent == root]
    assert any(name == "RunnableSequence" and parent == policy for name, _, parent in rec.chains)


def test_flag_policy_streams_the_answer(faiss_retriever, coverage_detector):
    rag = GuardedRAG(
        retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector, policy="flag")
    )
    chunks = list(rag.stream(OUT_OF_SCOPE))
    assert chunks[0]["verdict"].label == "out_of_scope"
    answers = [c["answer"] for c in chunks if "answer" in c]
    assert len(answers) > 1 and "".join(answers) == ANSWER  # chunk by chunk, not one invoke
    assert [c["action"] for c in chunks if "action" in c] == [Action.FLAGGED]


class _RunMetadata(BaseCallbackHandler):
    def __init__(self) -> None:
        self.runs: dict[str, tuple[dict, list[str]]] = {}

    def on_chain_start(self, serialized, inputs, **kw):
        self.runs.setdefault(kw.get("name") or "", (kw.get("metadata") or {}, kw.get("tags") or []))

    def on_chat_model_start(self, serialized, messages, **kw):
        self.runs.setdefault("chat_model", (kw.get("metadata") or {}, kw.get("tags") or []))


@pytest.mark.parametrize(
    ("question", "label", "step"),
    [(IN_SCOPE, "in_scope", "RunnableSequence"), (OUT_OF_SCOPE, "out_of_scope", "ScopeGuardPolicy")],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_verdict_is_in_the_run_metadata_and_tags(
    faiss_retriever, coverage_detector, question, label, step, mode
):
    handler = _RunMetadata()
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=Guard(detector=coverage_detector))
    if mode == "sync":
        rag.invoke(question, {"callbacks": [handler]})
    else:
        await rag.ainvoke(question, {"callbacks": [handler]})
    for name in ("ScopeGuardVerdict", step) + (("chat_model",) if label == "in_scope" else ()):
        metadata, tags = handler.runs[name]
        assert metadata["scopeguard_label"] == label and metadata["scopeguard_detector"] == "coverage"
        assert metadata["scopeguard_out_of_scope"] is (label == "out_of_scope")
        assert f"scopeguard:{label}" in tags
    assert "scopeguard_label" not in handler.runs["GuardedRAG"][0]  # known only after detection
