"""Guard control flow with a deterministic detector and the scripted chat model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from scopeguard import Action, Document, Guard, InputError, LLMConnectionError, Verdict
from scopeguard.detection.detectors import BaseDetector
from scopeguard.testing import ScriptedChatModel

DOC = Document(id="d1", text="The Kestrel ferry carries 180 passengers and crosses in 35 minutes.")


class KeywordDetector(BaseDetector):
    """Out of scope when the question mentions 'shipyard'; fails on 'boom'; unknown on 'maybe'."""

    name = "keyword"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.active = 0
        self.max_active = 0

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        if "boom" in question:
            raise LLMConnectionError("endpoint refused", endpoint="http://127.0.0.1:9")
        if "maybe" in question:
            return Verdict(label="unknown", rationale="no parseable verdict")
        oos = "shipyard" in question
        return Verdict(
            label="out_of_scope" if oos else "in_scope",
            score=0.9 if oos else 0.1,
            uncovered=("the shipyard",) if oos else (),
        )

    async def _adetect(self, question: str, documents: Sequence[Document]) -> Verdict:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.delay)
            return self._detect(question, documents)
        finally:
            self.active -= 1


def test_in_scope_question_is_answered_with_rag_prompt() -> None:
    llm = ScriptedChatModel(["35 minutes."])
    result = Guard(detector=KeywordDetector(), policy="refuse", llm=llm).answer(
        "How long is the crossing?", [DOC]
    )
    assert result.action is Action.ANSWERED
    assert result.response == "35 minutes."
    assert result.verdict.label == "in_scope"
    assert "Kestrel ferry" in llm.calls[0].prompt and "How long is the crossing?" in llm.calls[0].prompt


def test_out_of_scope_question_is_clarified_with_uncovered_parts() -> None:
    llm = ScriptedChatModel([])  # must not be called
    result = Guard(detector=KeywordDetector(), policy="clarify", llm=llm).answer(
        "Which shipyard built it?", DOC
    )
    assert result.action is Action.CLARIFIED
    assert '"the shipyard"' in (result.response or "")
    assert llm.requests == 0


def test_defuse_policy_reprompts_with_zero_shot_cot() -> None:
    llm = ScriptedChatModel(["The document does not say which shipyard built it."])
    result = Guard(detector=KeywordDetector(), policy="defuse", llm=llm).answer(
        "Which shipyard built it?", [DOC]
    )
    assert result.action is Action.DEFUSED
    assert "reason step by step" in llm.calls[0].prompt


def test_flag_policy_answers_and_keeps_verdict() -> None:
    result = Guard(detector=KeywordDetector(), policy="flag", llm=ScriptedChatModel(["Harland."])).answer(
        "Which shipyard built it?", [DOC]
    )
    assert result.action is Action.FLAGGED and result.response == "Harland."
    assert result.verdict.is_out_of_scope


def test_callable_policy() -> None:
    guard = Guard(detector=KeywordDetector(), policy=lambda q, docs, v: f"custom:{v.score}")
    result = guard.answer("Which shipyard built it?", [DOC])
    assert result.action is Action.CUSTOM and result.response == "custom:0.9"


def test_detector_failure_fails_closed_by_default() -> None:
    result = Guard(detector=KeywordDetector(), policy="refuse").answer("boom?", [DOC])
    assert result.failed_closed
    assert result.action is Action.REFUSED
    assert result.verdict.label == "unknown"
    assert "endpoint refused" in (result.verdict.error or "")


def test_unknown_verdict_fails_closed() -> None:
    result = Guard(detector=KeywordDetector(), policy="refuse").answer("maybe?", [DOC])
    assert result.failed_closed and result.action is Action.REFUSED


def test_fail_open_answers_and_raise_raises() -> None:
    llm = ScriptedChatModel(["answer"])
    opened = Guard(detector=KeywordDetector(), llm=llm, on_error="fail_open").answer("boom?", [DOC])
    assert opened.action is Action.ANSWERED and not opened.failed_closed
    with pytest.raises(LLMConnectionError):
        Guard(detector=KeywordDetector(), on_error="raise").check("boom?", [DOC])


def test_custom_responder_replaces_llm() -> None:
    result = Guard(detector=KeywordDetector()).answer(
        "How long?", [DOC], responder=lambda q, d: f"{len(d)} docs"
    )
    assert result.response == "1 docs"


def test_answer_without_llm_is_a_clear_error() -> None:
    from scopeguard import ConfigurationError

    with pytest.raises(ConfigurationError, match="needs an LLM"):
        Guard(detector=KeywordDetector()).answer("How long?", [DOC])


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_is_rejected(question: str) -> None:
    with pytest.raises(InputError, match="question is empty"):
        Guard(detector=KeywordDetector()).check(question, [DOC])


def test_no_documents_is_rejected() -> None:
    with pytest.raises(InputError, match="no documents"):
        Guard(detector=KeywordDetector()).check("How long?", [])


def test_bad_names_list_valid_ones() -> None:
    from scopeguard import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"valid names: .*refuse"):
        Guard(detector=KeywordDetector(), policy="refuze")
    with pytest.raises(ConfigurationError, match=r"valid names: .*judge"):
        Guard(detector="nope")


async def test_async_batch_runs_concurrently_within_bound() -> None:
    det = KeywordDetector(delay=0.05)
    guard = Guard(detector=det, policy="refuse", concurrency=3)
    items = [(f"Which shipyard {i}?", [DOC]) for i in range(9)]
    started = time.perf_counter()
    results = await guard.abatch(items)
    elapsed = time.perf_counter() - started
    assert [r.action for r in results] == [Action.REFUSED] * 9  # type: ignore[union-attr]
    assert det.max_active == 3
    assert elapsed < 9 * 0.05  # overlapped, not serial


def test_sync_batch_keeps_order() -> None:
    guard = Guard(detector=KeywordDetector(), policy="refuse")
    verdicts = guard.batch([("Which shipyard?", [DOC]), ("How long?", [DOC])], answer=False)
    assert [v.label for v in verdicts] == ["out_of_scope", "in_scope"]  # type: ignore[union-attr]


def test_unknown_detector_option_is_a_clear_error() -> None:
    from scopeguard import ConfigurationError, get_detector

    with pytest.raises(ConfigurationError, match="detector 'lexical' does not take the option 'llm'"):
        get_detector("lexical", llm="local")


def test_a_detector_built_by_name_gets_the_guards_llm() -> None:
    from scopeguard.detection.detectors.judge import JudgeDetector

    llm = ScriptedChatModel(["The answer is: No."] * 2 + ["35 minutes."])
    guard = Guard(detector="judge", llm=llm, policy="refuse")
    assert isinstance(guard.detector, JudgeDetector) and guard.detector.llm is llm
    assert guard.answer("How long is the crossing?", [DOC]).response == "35 minutes."
    assert llm.requests == 2  # one n=2 judge request, one answer
    # a factory without an ``llm`` keyword is built without it; an instance is used as given
    assert Guard(detector="lexical", llm=llm).detector.name == "lexical"
    own = JudgeDetector(ScriptedChatModel([]))
    assert Guard(detector=own, llm=llm).detector is own


def test_a_failing_answer_llm_fails_closed() -> None:
    from scopeguard import LLMResponseError

    llm = ScriptedChatModel([LLMResponseError("the LLM endpoint http://x/v1 sent a reply without choices")])
    result = Guard(detector=KeywordDetector(), policy="refuse", llm=llm).answer("How long?", [DOC])
    assert result.verdict.label == "in_scope"
    assert result.action is Action.REFUSED and result.failed_closed
    assert "without choices" in result.metadata["error"] and result.metadata["error_stage"] == "answer"


def test_the_guards_llm_goes_only_to_detectors_that_declare_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from scopeguard import ConfigurationError
    from scopeguard.detection.detectors import detector_takes, registry

    def picky(**options: object) -> KeywordDetector:  # like `default`: a catch-all that rejects llm
        if options:
            raise ConfigurationError(f"picky does not take the option(s) {', '.join(options)}")
        return KeywordDetector()

    monkeypatch.setitem(registry._DETECTORS, "picky", picky)
    llm = ScriptedChatModel(["35 minutes."])
    assert not detector_takes("picky", "llm") and not detector_takes("default", "llm")
    assert detector_takes("judge", "llm") and not detector_takes("logprob", "llm")  # logprob reads: reader=
    guard = Guard(detector="picky", llm=llm, policy="refuse")
    assert isinstance(guard.detector, KeywordDetector)
    assert guard.answer("How long?", [DOC]).response == "35 minutes."


async def test_a_failing_policy_llm_fails_closed_async() -> None:
    llm = ScriptedChatModel([LLMConnectionError("endpoint refused", endpoint="http://x/v1")])
    result = await Guard(detector=KeywordDetector(), policy="defuse", llm=llm).aanswer(
        "Which shipyard?", [DOC]
    )
    assert result.action is Action.REFUSED and result.failed_closed
    assert result.metadata["error_stage"] == "policy" and "refused" in result.metadata["error"]


def test_a_failing_answer_check_fails_closed() -> None:
    from scopeguard import LLMError

    class Broken:
        def check(self, result):  # type: ignore[no-untyped-def]
            raise LLMError("verifier down")

        async def acheck(self, result):  # type: ignore[no-untyped-def]
            raise LLMError("verifier down")

    guard = Guard(detector=KeywordDetector(), llm=ScriptedChatModel(["35."]), answer_check=Broken())
    result = guard.answer("How long?", [DOC])
    assert result.failed_closed and result.metadata["error_stage"] == "answer_check"


def test_configuration_errors_are_not_swallowed_by_the_answer_step() -> None:
    from scopeguard import ConfigurationError

    with pytest.raises(ConfigurationError, match="needs an LLM"):
        Guard(detector=KeywordDetector(), on_error="fail_open").answer("boom?", [DOC])


async def test_batch_keeps_results_when_one_item_fails() -> None:
    llm = ScriptedChatModel(lambda prompt: "x")
    guard = Guard(detector=KeywordDetector(), policy="refuse", llm=llm)
    results = await guard.abatch([("How long?", [DOC]), ("", [DOC]), ("boom?", [DOC]), ("Why?", [])])
    assert [r.failed_closed for r in results] == [False, True, True, True]  # type: ignore[union-attr]
    assert "question is empty" in (results[1].verdict.error or "")  # type: ignore[union-attr]
    verdicts = await guard.abatch([("How long?", [DOC]), ("", [DOC])], answer=False)
    assert [v.label for v in verdicts] == ["in_scope", "unknown"]  # type: ignore[union-attr]


async def test_batch_with_raise_raises_after_every_item_finished() -> None:
    det = KeywordDetector(delay=0.05)
    guard = Guard(detector=det, on_error="raise", concurrency=4)
    with pytest.raises(LLMConnectionError):
        await guard.abatch([("boom?", [DOC]), ("How long?", [DOC]), ("Which shipyard?", [DOC])], answer=False)
    assert det.active == 0


def test_guard_deadline_reaches_the_llm_calls() -> None:
    from scopeguard.llm.deadline import remaining

    seen: list[float | None] = []

    def reply(prompt: str) -> str:
        seen.append(remaining())
        return "35 minutes."

    Guard(detector=KeywordDetector(), llm=ScriptedChatModel(reply), deadline=5.0).answer("How long?", [DOC])
    assert seen and seen[0] is not None and 0 < seen[0] <= 5.0
    Guard(detector=KeywordDetector(), llm=ScriptedChatModel(reply)).answer("How long?", [DOC])
    assert seen[-1] is not None and 5.0 < seen[-1] <= 120.0  # the default deadline
    Guard(detector=KeywordDetector(), llm=ScriptedChatModel(reply), deadline=None).answer("How long?", [DOC])
    assert seen[-1] is None
