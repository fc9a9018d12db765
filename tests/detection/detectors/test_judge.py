"""The prompted judge: labels from votes, unknown handling, prompts, errors, and a real model."""

from __future__ import annotations

import pytest

from scopeguard import Guard, get_detector
from scopeguard.detection.detectors.judge import JudgeDetector
from scopeguard.errors import ConfigurationError, LLMConnectionError
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document

YES = "The document never names a CEO. The answer is: Yes."
NO = "Everything the question asks about is in the document. The answer is: No."
JUNK = "Hmm, hard to say."
DOC = "The Lumen bakery in Tallinn opened in 2019 and sells rye bread."


def test_yes_majority_is_out_of_scope_with_vote_share_score() -> None:
    llm = ScriptedChatModel([YES, NO, YES])
    v = JudgeDetector(llm, votes=3).detect("Who is the CEO of Lumen?", DOC)
    assert v.label == "out_of_scope" and v.is_out_of_scope
    assert v.score == pytest.approx(2 / 3)
    assert v.llm_calls == 3 and len(v.votes) == 3
    assert [x.label for x in v.votes] == ["out_of_scope", "in_scope", "out_of_scope"]
    assert v.rationale == "The document never names a CEO."
    assert v.votes[1].raw == NO
    assert v.detector == "judge" and v.latency_ms > 0


def test_no_majority_is_in_scope_and_stops_early() -> None:
    llm = ScriptedChatModel([NO, NO])
    v = JudgeDetector(llm).detect("When did Lumen open?", DOC)
    assert v.label == "in_scope" and v.score == 0.0 and v.llm_calls == 2


def test_unknown_votes_are_excluded_from_the_score() -> None:
    v = JudgeDetector(ScriptedChatModel([YES, JUNK, YES])).detect("q?", DOC)
    assert v.label == "out_of_scope" and v.score == 1.0
    assert v.votes[1].label == "unknown"


def test_unparseable_majority_is_unknown_never_a_default_label() -> None:
    v = JudgeDetector(ScriptedChatModel([JUNK, JUNK])).detect("q?", DOC)
    assert v.label == "unknown" and v.score is None
    assert "no majority" in v.rationale


def test_single_greedy_vote() -> None:
    llm = ScriptedChatModel([NO])
    v = JudgeDetector(llm, votes=1, temperature=0.0).detect("q?", DOC)
    assert v.label == "in_scope" and v.llm_calls == 1
    assert llm.calls[0].temperature == 0.0 and llm.calls[0].n == 1


def test_prompt_is_the_papers_with_all_documents_in_the_slot() -> None:
    llm = ScriptedChatModel([NO, NO])
    docs = [Document(text=DOC, id="a"), Document(text="Its owner is Mari Tamm.", id="b")]
    JudgeDetector(llm).detect("Who owns Lumen?", docs)
    prompt = llm.calls[0].prompt
    assert "Check if the question contains any confusing parts" in prompt
    assert DOC in prompt and "Its owner is Mari Tamm." in prompt
    assert "Question: Who owns Lumen?" in prompt
    assert prompt.rstrip().endswith("'The answer is: Yes or No.':")


def test_connection_error_propagates_and_guard_fails_closed() -> None:
    down = LLMConnectionError("cannot reach http://127.0.0.1:9/v1", endpoint="http://127.0.0.1:9/v1")
    judge = JudgeDetector(ScriptedChatModel([down]))
    with pytest.raises(LLMConnectionError):
        judge.detect("q?", DOC)
    guard = Guard(detector=JudgeDetector(ScriptedChatModel([down])), policy="refuse")
    verdict = guard.check("q?", DOC)
    assert verdict.label == "unknown" and "127.0.0.1:9" in (verdict.error or "")


def test_a_dead_endpoint_raises_instead_of_labelling() -> None:
    import socket

    from scopeguard.llm.openai_compat import OpenAIChatModel

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    judge = JudgeDetector(OpenAIChatModel("m", base_url=url, backoff=0.01))
    with pytest.raises(LLMConnectionError) as info:
        judge.detect("q?", DOC)
    assert info.value.endpoint == url


async def test_async_detect() -> None:
    v = await JudgeDetector(ScriptedChatModel([YES, YES])).adetect("q?", DOC)
    assert v.label == "out_of_scope" and v.llm_calls == 2


def test_registry_builds_the_judge() -> None:
    det = get_detector("judge", llm=ScriptedChatModel([NO, NO]), votes=3)
    assert isinstance(det, JudgeDetector) and det.detect("q?", DOC).label == "in_scope"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"votes": 0}, "votes"), ({"temperature": -1.0}, "temperature"), ({"template": "nope"}, "template")],
)
def test_bad_configuration(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        JudgeDetector(ScriptedChatModel([]), **kwargs)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.integration
def test_judge_on_the_real_local_model(local_gguf: object) -> None:
    judge = JudgeDetector("local", votes=3, temperature=0.7, seed=7, max_tokens=160)
    v = judge.detect("What is the name of the bakery's head chef?", DOC)
    assert v.label in ("in_scope", "out_of_scope", "unknown")
    assert 2 <= v.llm_calls <= 3
    assert len(v.votes) == v.llm_calls
    assert all(vote.raw for vote in v.votes)  # the model really generated text
    parsed = [x for x in v.votes if x.label != "unknown"]
    if v.label != "unknown":
        assert v.score is not None and 0.0 <= v.score <= 1.0
        assert len(parsed) >= 2


def test_strict_template_variant_keeps_the_yes_means_out_of_scope_contract() -> None:
    llm = ScriptedChatModel([YES, YES])
    v = JudgeDetector(llm, template="oos_judgement_strict").detect("Who founded Lumen?", DOC)
    assert v.label == "out_of_scope"
    prompt = llm.calls[0].prompt
    assert DOC in prompt and "Question: Who founded Lumen?" in prompt
    assert "list the specific details the question relies on" in prompt
    assert prompt.rstrip().endswith("'The answer is: Yes.' or 'The answer is: No.'")


def test_followup_asks_a_verdict_less_sample_once_more() -> None:
    llm = ScriptedChatModel([JUNK, YES, "The answer is: Yes."])
    judge = JudgeDetector(llm, votes=3, followup=True)
    verdict = judge.detect("Who is the CEO?", [Document(id="d", text=DOC)])
    assert verdict.label == "out_of_scope" and verdict.llm_calls == 3
    assert [v.label for v in verdict.votes] == ["out_of_scope", "out_of_scope"]
    assert verdict.votes[0].raw == JUNK and verdict.votes[0].followup == "The answer is: Yes."
    assert verdict.votes[1].followup is None


def test_no_followup_by_default_as_in_the_paper() -> None:
    llm = ScriptedChatModel([JUNK, JUNK])
    verdict = JudgeDetector(llm, votes=3).detect("Who is the CEO?", [Document(id="d", text=DOC)])
    assert verdict.label == "unknown" and len(llm.calls) == 1


def test_paper_config_draws_nine_votes_without_a_cap() -> None:
    from scopeguard.judging import JudgeConfig

    llm = ScriptedChatModel([YES] * 9)
    judge = JudgeDetector(llm, config=JudgeConfig.paper())
    verdict = judge.detect("Who is the CEO?", [Document(id="d", text=DOC)])
    assert verdict.label == "out_of_scope" and len(verdict.votes) == 9 and verdict.llm_calls == 9
    assert [(c.n, c.max_tokens) for c in llm.calls] == [(9, None)]
    assert (judge.votes, judge.adaptive, judge.followup) == (9, False, False)
    with pytest.raises(ConfigurationError, match="not both"):
        JudgeDetector(llm, config=JudgeConfig.paper(), votes=3)


def test_cut_replies_are_marked_and_redrawn() -> None:
    long_yes = "The document " + "never names it, " * 10 + "The answer is: Yes."
    llm = ScriptedChatModel([long_yes, long_yes], truncate=True)
    judge = JudgeDetector(llm, votes=1, max_tokens=8)
    verdict = judge.detect("Who is the CEO?", [Document(id="d", text=DOC)])
    assert verdict.label == "out_of_scope" and verdict.votes[0].truncated
    assert "1 of 1 replies hit the 8-token cap, 1 drawn again without the cap" in verdict.rationale
    judge.max_tokens = None  # a judge without its cap (the generator's filter lifts it this way)
    assert judge.config.max_tokens is None and judge.votes == 1
