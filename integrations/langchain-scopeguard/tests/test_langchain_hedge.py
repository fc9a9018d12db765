"""GuardedRAG with a calibrated guard: answered, hedged (the chain's answer and the caveat) or refused."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain_scopeguard", reason="pip install ./integrations/langchain-scopeguard")

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_scopeguard import GuardedRAG, rag_prompt
from lc_testkit import IN_SCOPE, OUT_OF_SCOPE, RunRecorder

from scopeguard import Action, Guard, Verdict
from scopeguard.policies import HEDGE_CAVEAT
from scopeguard.testing import ScriptedChatModel, ScriptedDetector, calibration_profile

ANSWER = "It opened in 1887."
HEDGY = "When did the Brindle Valley railway open, and who paid for it?"
SCORES = {IN_SCOPE: 0.1, HEDGY: 0.45, OUT_OF_SCOPE: 0.9}


def _chain(answer: str = ANSWER):
    return rag_prompt() | FakeListChatModel(responses=[answer] * 10) | StrOutputParser()


@pytest.fixture
def profile_dir(tmp_path: Path) -> Path:
    return calibration_profile(folder=tmp_path / "profile")  # threshold 0.6, hedged from 0.4


def _guard(profile_dir: Path, **kw: object) -> Guard:
    return Guard(detector=ScriptedDetector(SCORES), policy="refuse", calibration=profile_dir, **kw)  # type: ignore[arg-type]


def test_a_calibrated_guard_answers_hedges_and_refuses(faiss_retriever, profile_dir):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=_guard(profile_dir))
    answered, hedged, refused = rag.batch([IN_SCOPE, HEDGY, OUT_OF_SCOPE])
    assert (answered["action"], answered["answer"]) == (Action.ANSWERED, ANSWER)
    assert (hedged["action"], hedged["answer"]) == (Action.HEDGED, f"{ANSWER}\n\n{HEDGE_CAVEAT}")
    assert isinstance(hedged["verdict"], Verdict) and hedged["verdict"].hedge
    assert hedged["verdict"].label == "in_scope" and hedged["failed_closed"] is False
    assert refused["action"] == Action.REFUSED and not refused["verdict"].hedge


async def test_ainvoke_hedges_too(faiss_retriever, profile_dir):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=_guard(profile_dir))
    out = await rag.ainvoke({"question": HEDGY})
    assert (out["action"], out["answer"]) == (Action.HEDGED, f"{ANSWER}\n\n{HEDGE_CAVEAT}")


def test_stream_yields_the_chains_chunks_then_the_caveat(faiss_retriever, profile_dir):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(ANSWER + "\n"), guard=_guard(profile_dir))
    chunks = list(rag.stream(HEDGY))
    assert chunks[0]["verdict"].hedge
    answers = [c["answer"] for c in chunks if "answer" in c]
    assert len(answers) > 2 and answers[-1] == f"\n\n{HEDGE_CAVEAT}"  # the caveat is a chunk of its own
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    # the same text as invoke (the chain's trailing newline is not doubled before the caveat)
    assert total["answer"] == rag.invoke(HEDGY)["answer"] == f"{ANSWER}\n\n{HEDGE_CAVEAT}"
    assert total["action"] == Action.HEDGED


async def test_astream_yields_the_caveat_last(faiss_retriever, profile_dir):
    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=_guard(profile_dir))
    answers = [c["answer"] async for c in rag.astream(HEDGY) if "answer" in c]
    assert "".join(answers) == f"{ANSWER}\n\n{HEDGE_CAVEAT}" and answers[-1] == f"\n\n{HEDGE_CAVEAT}"
    plain = [c["answer"] async for c in rag.astream(IN_SCOPE) if "answer" in c]
    assert "".join(plain) == ANSWER


def test_without_a_chain_the_guards_llm_answers_and_the_caveat_follows(faiss_retriever, profile_dir):
    llm = ScriptedChatModel(lambda prompt: ANSWER)
    rag = GuardedRAG(retriever=faiss_retriever, guard=_guard(profile_dir, llm=llm))
    out = rag.invoke(HEDGY)
    assert (out["action"], out["answer"]) == (Action.HEDGED, f"{ANSWER}\n\n{HEDGE_CAVEAT}")
    assert "Read the document and answer the question" in llm.calls[0].prompt  # the answer_template
    streamed = [c["answer"] for c in rag.stream(HEDGY) if "answer" in c]
    assert streamed == [ANSWER, f"\n\n{HEDGE_CAVEAT}"]


def test_hedge_none_answers_plainly_and_another_policy_responds_in_one_chunk(faiss_retriever, profile_dir):
    plain = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=_guard(profile_dir, hedge=None))
    out = plain.invoke(HEDGY)
    assert (out["action"], out["answer"]) == (Action.ANSWERED, ANSWER)
    clarify = GuardedRAG(
        retriever=faiss_retriever, chain=_chain(), guard=_guard(profile_dir, hedge="clarify")
    )
    assert clarify.invoke(HEDGY)["action"] == Action.CLARIFIED
    chunks = [c for c in clarify.stream(HEDGY) if "answer" in c]
    assert len(chunks) == 1 and chunks[0]["action"] == Action.CLARIFIED


def test_the_hedge_step_is_traced_with_the_verdict(faiss_retriever, profile_dir):
    rec = RunRecorder()
    seen: list[dict] = []

    class Meta(RunRecorder):
        def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kw):  # type: ignore[no-untyped-def]
            if kw.get("name") == "ScopeGuardHedge":
                seen.append({"metadata": kw.get("metadata") or {}, "tags": kw.get("tags") or []})

    rag = GuardedRAG(retriever=faiss_retriever, chain=_chain(), guard=_guard(profile_dir))
    rag.invoke(HEDGY, config={"callbacks": [rec, Meta()]})
    ((root_name, root, _),) = [c for c in rec.chains if c[2] is None]
    (hedge_run,) = [run for name, run, parent in rec.chains if name == "ScopeGuardHedge" and parent == root]
    assert root_name == "GuardedRAG" and hedge_run
    assert any(parent == hedge_run for _, _, parent in rec.chains)  # the chain runs under the hedge step
    (meta,) = seen
    assert meta["metadata"]["scopeguard_hedge"] is True and "scopeguard:hedge" in meta["tags"]
