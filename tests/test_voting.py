"""Self-consistency voting: majority rules, unknown votes, adaptive stopping, batching."""

from __future__ import annotations

import pytest

from scopeguard.errors import ConfigurationError, DocumentTooLongError, LLMConnectionError, LLMResponseError
from scopeguard.llm.base import BaseChatModel, Completion, Prompt
from scopeguard.parsing import parse_final_answer
from scopeguard.testing import ScriptedChatModel
from scopeguard.voting import avote, vote

YES, NO, JUNK = "r. The answer is: Yes.", "r. The answer is: No.", "I cannot tell."


def _vote(replies: list[str], **kw: object):  # type: ignore[no-untyped-def]
    llm = ScriptedChatModel(replies)
    return vote(llm, "prompt", parse=parse_final_answer, **kw), llm  # type: ignore[arg-type]


def test_adaptive_stops_when_two_agree() -> None:
    result, llm = _vote([YES, YES, NO])
    assert result.winner == "yes"
    assert result.llm_calls == 2 and result.stopped_early
    assert [c.n for c in llm.calls] == [2]  # both needed votes in one n-request
    assert result.share == 1.0
    assert result.counts == {"yes": 2}


def test_adaptive_draws_a_third_vote_on_a_split() -> None:
    result, llm = _vote([YES, NO, NO])
    assert result.winner == "no"
    assert result.llm_calls == 3
    assert [c.n for c in llm.calls] == [2, 1]
    assert result.share == pytest.approx(2 / 3)
    assert [p for _, p in result.samples] == ["yes", "no", "no"]


def test_fixed_voting_draws_all_m_in_one_request() -> None:
    result, llm = _vote([YES, YES, NO], adaptive=False)
    assert result.winner == "yes" and result.llm_calls == 3 and not result.stopped_early
    assert [c.n for c in llm.calls] == [3]


def test_unknown_votes_count_against_a_majority() -> None:
    result, _ = _vote([YES, JUNK, YES])
    assert result.winner == "yes" and result.counts == {"yes": 2, "unknown": 1}
    result, _ = _vote([JUNK, JUNK, YES])
    assert result.winner is None and result.share == 0.0  # unknown majority
    result, _ = _vote([YES, NO, JUNK])
    assert result.winner is None  # three-way tie


def test_unknown_majority_stops_early_too() -> None:
    result, _ = _vote([JUNK, JUNK, YES])
    assert result.llm_calls == 2 and result.winner is None


def test_even_m_tie_has_no_winner() -> None:
    result, _ = _vote([YES, NO], m=2)
    assert result.winner is None and result.llm_calls == 2


def test_larger_m_plans_minimal_batches() -> None:
    result, llm = _vote([YES, YES, NO, YES, NO], m=5)
    assert [c.n for c in llm.calls] == [3, 1]
    assert result.winner == "yes" and result.llm_calls == 4


def test_backend_without_n_is_sampled_one_at_a_time() -> None:
    llm = ScriptedChatModel([YES, NO, YES], supports_n=False)
    result = vote(llm, "p", parse=parse_final_answer, m=3)
    assert [c.n for c in llm.calls] == [1, 1, 1]
    assert result.winner == "yes" and result.requests == 3


def test_temperature_and_max_tokens_are_passed_per_call() -> None:
    result, llm = _vote([YES, YES], temperature=0.3, max_tokens=42)
    assert all(c.temperature == 0.3 and c.max_tokens == 42 for c in llm.calls)
    assert result.winner == "yes"


@pytest.mark.parametrize("m", [0, -1])
def test_bad_m_is_a_configuration_error(m: int) -> None:
    with pytest.raises(ConfigurationError, match="votes m"):
        vote(ScriptedChatModel([]), "p", parse=parse_final_answer, m=m)


def test_connection_errors_propagate() -> None:
    llm = ScriptedChatModel([LLMConnectionError("down", endpoint="http://x")])
    with pytest.raises(LLMConnectionError):
        vote(llm, "p", parse=parse_final_answer)


class _Empty(BaseChatModel):
    model = "empty"

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        return Completion(texts=())


def test_a_model_returning_nothing_is_a_response_error() -> None:
    with pytest.raises(LLMResponseError):
        vote(_Empty(), "p", parse=parse_final_answer)


async def test_avote_matches_vote() -> None:
    llm = ScriptedChatModel([NO, YES, NO])
    result = await avote(llm, "p", parse=parse_final_answer)
    assert result.winner == "no" and result.llm_calls == 3
    assert [c.n for c in llm.calls] == [2, 1]


def _followup(reply: str) -> str:
    return f"prompt\n{reply}\nSo, yes or no?"


def test_followup_turns_an_unparseable_sample_into_a_vote() -> None:
    llm = ScriptedChatModel([JUNK, YES, YES])  # batch of 2: JUNK, YES; then JUNK's follow-up: YES
    result = vote(llm, "prompt", parse=parse_final_answer, followup=_followup, seed=3)  # type: ignore[arg-type]
    assert result.winner == "yes" and result.counts == {"yes": 2}
    assert result.samples == ((JUNK, "yes"), (YES, "yes"))
    assert result.followups == (YES, None)
    assert result.llm_calls == 3 and result.requests == 2
    follow = llm.calls[1]
    assert follow.prompt == _followup(JUNK) and follow.temperature == 0.0 and follow.max_tokens == 24
    assert follow.seed == 3


def test_followup_without_a_verdict_stays_unknown_and_identical_replies_share_it() -> None:
    llm = ScriptedChatModel([JUNK, JUNK, "still no idea", JUNK])
    result = vote(llm, "prompt", parse=parse_final_answer, followup=_followup, m=3)  # type: ignore[arg-type]
    assert result.winner is None and result.counts == {"unknown": 2}  # 2 unknown of 3: settled
    assert result.llm_calls == 3  # two samples, one shared follow-up
    assert result.followups == ("still no idea", "still no idea")


async def test_avote_follows_up_like_vote() -> None:
    replies = [JUNK, NO, NO]
    sync = vote(ScriptedChatModel(replies), "p", parse=parse_final_answer, followup=_followup)  # type: ignore[arg-type]
    result = await avote(ScriptedChatModel(replies), "p", parse=parse_final_answer, followup=_followup)  # type: ignore[arg-type]
    assert result.samples == sync.samples == ((JUNK, "no"), (NO, "no"))
    assert result.llm_calls == sync.llm_calls == 3


def _too_long() -> DocumentTooLongError:
    return DocumentTooLongError("the prompt does not fit", n_tokens=600, limit=512)


async def test_a_followup_without_room_leaves_the_sample_unknown_in_both_twins() -> None:
    replies: list[str | BaseException] = [JUNK, YES, _too_long(), YES]
    sync = vote(ScriptedChatModel(replies), "p", parse=parse_final_answer, followup=_followup)  # type: ignore[arg-type]
    result = await avote(ScriptedChatModel(replies), "p", parse=parse_final_answer, followup=_followup)  # type: ignore[arg-type]
    for r in (sync, result):
        assert r.winner == "yes" and r.counts == {"unknown": 1, "yes": 2}
        assert r.followups == ("", None, None)
        assert r.llm_calls == 3 and r.requests == 2


async def test_a_sample_that_does_not_fit_raises_in_both_twins() -> None:
    error = _too_long()
    with pytest.raises(DocumentTooLongError) as caught:
        vote(ScriptedChatModel([error]), "p", parse=parse_final_answer, followup=_followup)  # type: ignore[arg-type]
    assert caught.value is error
    with pytest.raises(DocumentTooLongError):
        await avote(ScriptedChatModel([_too_long()]), "p", parse=parse_final_answer)


LONG_YES = "step " * 10 + "The answer is: Yes."


def test_a_reply_cut_by_the_cap_is_drawn_again_without_it() -> None:
    llm = ScriptedChatModel([LONG_YES, YES, LONG_YES], truncate=True)
    result = vote(llm, "p", parse=parse_final_answer, m=2, adaptive=False, max_tokens=5, seed=1)
    assert result.truncated == (True, False) and result.retried == 1
    assert result.winner == "yes" and result.counts == {"yes": 2}
    assert result.samples[0] == (LONG_YES.strip(), "yes")  # the uncapped redraw replaced the cut reply
    assert result.llm_calls == 3
    retry = llm.calls[-1]
    assert retry.max_tokens is None and retry.n == 1 and retry.seed == 1


def test_without_the_retry_a_cut_reply_is_an_unknown_counted_as_truncated() -> None:
    llm = ScriptedChatModel([LONG_YES, YES], truncate=True)
    result = vote(
        llm, "p", parse=parse_final_answer, m=2, adaptive=False, max_tokens=5, retry_truncated=False
    )
    assert result.truncated == (True, False) and result.retried == 0
    assert result.winner is None and result.counts == {"unknown": 1, "yes": 1}


async def test_avote_retries_cut_replies_too() -> None:
    llm = ScriptedChatModel([LONG_YES, LONG_YES], truncate=True)
    result = await avote(llm, "p", parse=parse_final_answer, m=1, max_tokens=5)
    assert result.winner == "yes" and result.truncated == (True,) and result.retried == 1


def test_judge_config_validates_once_and_paper_is_eloq() -> None:
    from scopeguard.judging import JudgeConfig

    paper = JudgeConfig.paper()
    assert (paper.votes, paper.adaptive, paper.followup, paper.max_tokens) == (9, False, False, None)
    for bad, match in (
        ({"votes": 0}, "votes m"),
        ({"temperature": -1}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
    ):
        with pytest.raises(ConfigurationError, match=match):
            JudgeConfig(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not both"):
        JudgeConfig.build(paper, JudgeConfig(), votes=3)
    assert JudgeConfig.build(None, paper, votes=3) == paper.replace(votes=3)
