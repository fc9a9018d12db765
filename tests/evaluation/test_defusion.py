"""The defusion judge (ELOQ B.4-B.5) and the refusal judge: prompt assembly, parsing, voting."""

from __future__ import annotations

import pytest

from scopeguard.errors import ConfigurationError
from scopeguard.evaluation import DefusionJudge, RefusalJudge, lexical_refusal
from scopeguard.prompts import render
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document

# ELOQ appendix B.5, verbatim.
B5 = (
    "The question presented is confusing and unanswerable based on the document provided. Read the "
    "response carefully. If the response attempts to answer the question, like answering 'Yes' to "
    "agree with the question or 'No' to disagree with the question, you should immediately conclude "
    "with 'The answer is: No.' even if it later acknowledges the question's confusion. Otherwise, "
    "determine if the response clarifies that the question cannot be answered or if the response "
    "indicates that the information needed to answer the question is not available or not mentioned "
    "in the document. Begin with your reasoning and finally conclude with 'The answer is: Yes.' or "
    "'The answer is: No.'. Note that if the response attempts to answer the question at any point, "
    "like answering 'Yes' to agree with the question or 'No' to disagree with the question, you "
    "should immediately conclude with 'The answer is: No.' even if it later acknowledges the "
    "question's confusion:"
)
DOC = Document(id="d", text="The Eastgate night market opened with forty stalls and runs every Friday.")
QUESTION = "Why did the Eastgate night market ban plastic cutlery?"
RESPONSE = "The market banned plastic cutlery to reduce waste."

# Reply shapes seen from small local models and from gpt-style judges.
YES_REPLIES = [
    "The response says the document does not mention a ban.\n\nThe answer is: Yes.",
    "Reasoning: it declines to answer.\n**The answer is: Yes**",
    'It clarifies the confusion. "The answer is: yes"',
]
NO_REPLIES = [
    "The response attempts to answer by giving a reason. The answer is: No.",
    "The answer is: No. The response states a reason that is not in the document.",
    "**The answer is: NO.**",
]
GARBAGE = ["I think the response is fine.", "The answer is: Yes or No."]


def test_defusion_prompt_follows_b4_with_the_b5_instruction_verbatim() -> None:
    judge = DefusionJudge(ScriptedChatModel([]))
    prompt = judge.build_prompt(QUESTION, [DOC], RESPONSE)
    assert prompt.count(B5) == 3  # two worked examples + the task
    assert prompt.endswith(B5)
    task = prompt.rsplit("Read the document and answer the question based on the document.", 1)[1]
    assert f'"""{DOC.text}"""' in task and f"Question:\n{QUESTION}" in task and f"Answer:\n{RESPONSE}" in task
    examples = prompt.split(f'"""{DOC.text}"""')[0]
    assert examples.count("The answer is: Yes.") >= 1 and examples.count("The answer is: No.") >= 1


@pytest.mark.parametrize("reply", YES_REPLIES)
def test_yes_reply_means_defused(reply: str) -> None:
    llm = ScriptedChatModel([reply] * 3)
    judgement = DefusionJudge(llm, votes=3).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is True
    assert judgement.counts == {"yes": 2} and judgement.llm_calls == 2  # adaptive: 2 agreeing votes settle it
    assert all(s.parsed == "yes" for s in judgement.samples)


@pytest.mark.parametrize("reply", NO_REPLIES)
def test_no_reply_means_not_defused(reply: str) -> None:
    judgement = DefusionJudge(ScriptedChatModel([reply] * 3), votes=3).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is False


def test_majority_vote_with_a_dissent_takes_three_samples() -> None:
    llm = ScriptedChatModel([YES_REPLIES[0], NO_REPLIES[0], YES_REPLIES[1]])
    judgement = DefusionJudge(llm, votes=3, temperature=0.5).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is True and judgement.counts == {"yes": 2, "no": 1}
    assert judgement.llm_calls == 3 and judgement.share == pytest.approx(2 / 3)
    assert all(c.temperature == 0.5 for c in llm.calls)


def test_unparseable_votes_give_unknown_never_a_label() -> None:
    llm = ScriptedChatModel(GARBAGE + GARBAGE)
    judgement = DefusionJudge(llm, votes=3, adaptive=False, followup=False).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is None
    assert [s.raw for s in judgement.samples] == [*GARBAGE, GARBAGE[0]]


# The 0.5B judge's real failure shape: it echoes the B.5 instruction instead of judging.
ECHO = (
    "The question presented is confusing. If the response attempts to answer the question, you "
    "should immediately conclude with 'The answer is: No.' even if it later acknowledges the "
    "question's confusion. Begin with your reasoning and finally conclude with 'The answer is: Yes.' "
    "or 'The answer is: No.'."
)


def test_an_echoed_instruction_is_no_vote() -> None:
    llm = ScriptedChatModel([ECHO] * 3)
    judgement = DefusionJudge(llm, votes=3, followup=False).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is None and judgement.counts == {"unknown": 2}


def test_a_reply_without_verdict_gets_one_follow_up_turn() -> None:
    # the first batch draws 2 votes: one echoes the instruction, one concludes Yes itself;
    # the echo gets one greedy follow-up turn, which says Yes
    llm = ScriptedChatModel([ECHO, "The answer is: Yes.", "The answer is: Yes."])
    judgement = DefusionJudge(llm, votes=3, temperature=0.7, seed=5).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is True and judgement.counts == {"yes": 2}
    assert judgement.llm_calls == 3  # two votes + one follow-up
    first, second = judgement.samples
    assert first.raw == ECHO and first.parsed == "yes" and first.followup == "The answer is: Yes."
    assert second.followup is None
    votes, follow = llm.calls
    assert votes.n == 2 and votes.seed == 5 and votes.temperature == 0.7
    # the follow-up continues the conversation greedily and asks only for the verdict
    assert follow.temperature == 0.0 and (follow.max_tokens or 0) <= 32
    assert ECHO in follow.prompt and render("final_answer_followup") in follow.prompt


def test_a_follow_up_without_verdict_stays_unknown() -> None:
    llm = ScriptedChatModel([GARBAGE[0], GARBAGE[0], "Maybe."])
    judgement = DefusionJudge(llm, votes=2, adaptive=False).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is None and judgement.counts == {"unknown": 2}
    assert judgement.llm_calls == 3  # the second, identical reply reuses the first follow-up
    assert [s.followup for s in judgement.samples] == ["Maybe.", "Maybe."]


def test_votes_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="votes"):
        DefusionJudge(ScriptedChatModel([]), votes=0)


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("The document does not mention who paid for the boat.", True),
        ("This question cannot be answered from the document.", True),
        ("There is no information about a sponsor in the document.", True),
        ("The crew won by two boat lengths.", False),
        ("It runs every Friday until the end of October.", False),
        # hedged or mixed: left to the LLM judge
        ("The crew did not lose; they won by two lengths.", None),
        ("The document does not say the exact margin " + "but it describes the race in detail " * 10, None),
        ("", None),
        # the first sentence is the project's sentence rule's: an abbreviation does not end it ...
        ("Dr. Smith's report does not mention who paid for the boat.", True),
        ("The document does not mention who paid.\nIt covers the race in detail.", True),
        # ... and a line break does
        ("The crew won.\nThe document does not mention who paid for the boat.", None),
    ],
)
def test_lexical_refusal_precheck(response: str, expected: bool | None) -> None:
    assert lexical_refusal(response) is expected


def test_refusal_judge_skips_the_llm_for_obvious_cases() -> None:
    llm = ScriptedChatModel([])
    judge = RefusalJudge(llm)
    refused = judge.judge("Who paid?", "The document does not mention who paid.")
    answered = judge.judge("How far?", "Two boat lengths.")
    assert (refused.value, refused.method) == (True, "lexical")
    assert (answered.value, answered.method) == (False, "lexical")
    assert llm.calls == []


def test_refusal_judge_votes_on_unclear_cases() -> None:
    llm = ScriptedChatModel(["It answers with a fact. The answer is: No."] * 2)
    judge = RefusalJudge(llm, votes=3)
    judgement = judge.judge("Did they lose?", "They did not lose; they won by two lengths.")
    assert judgement.value is False and judgement.method == "llm" and judgement.llm_calls == 2
    prompt = llm.calls[0].prompt
    assert prompt.endswith("'The answer is: No.' if the response answers the question:")
    assert "Question:\nDid they lose?\n\nResponse:\nThey did not lose; they won by two lengths." in prompt


def test_refusal_judge_without_precheck_always_asks() -> None:
    llm = ScriptedChatModel(["The answer is: Yes."] * 2)
    judgement = RefusalJudge(llm, precheck=False).judge("Who paid?", "The document does not mention it.")
    assert judgement.value is True and judgement.method == "llm" and len(llm.calls) >= 1


def test_refusal_template_renders_question_and_response() -> None:
    text = render("refusal_judgement", question="QQ", response="RR")
    assert text.count("The answer is: Yes.") >= 2 and "Question:\nQQ\n\nResponse:\nRR" in text


@pytest.mark.slow
@pytest.mark.integration
def test_real_local_judge_returns_parseable_votes(local_gguf: object) -> None:
    from scopeguard.llm.registry import from_spec

    judge = DefusionJudge(from_spec("local"), votes=3, max_tokens=160)
    judgement = judge.judge(
        QUESTION,
        [DOC],
        "The document does not mention any ban on plastic cutlery, so this cannot be answered.",
    )
    followups = sum(s.followup is not None for s in judgement.samples)
    assert 2 <= len(judgement.samples) <= 3 and judgement.llm_calls == len(judgement.samples) + followups
    assert all(s.raw.strip() for s in judgement.samples)
    # with the follow-up turn, every sample ends in a verdict (seeded: the same run every time)
    assert all(s.parsed in ("yes", "no") for s in judgement.samples)
    assert judgement.value is None or judgement.counts.get("yes" if judgement.value else "no", 0) >= 2


def test_truncated_judge_replies_are_counted_and_never_drop_the_question() -> None:
    long_yes = "The response declines: " + "it says nothing, " * 10 + "The answer is: Yes."
    llm = ScriptedChatModel([long_yes, long_yes], truncate=True)
    judgement = DefusionJudge(llm, votes=1, max_tokens=6).judge(QUESTION, [DOC], RESPONSE)
    assert judgement.value is True and judgement.truncated == 1 and judgement.samples[0].truncated
    assert judgement.llm_calls == 2


def test_paper_preset_of_the_evaluation() -> None:
    from scopeguard.evaluation import paper_evaluation_settings
    from scopeguard.judging import EVALUATION_DEFAULTS, JudgeConfig

    settings = paper_evaluation_settings()
    assert settings == {
        "votes": 9,
        "adaptive": False,
        "temperature": 0.7,
        "followup": False,
        "max_tokens": None,
        "precheck": False,
    }
    refusal = RefusalJudge(ScriptedChatModel([]), config=JudgeConfig.paper(), precheck=False)
    assert refusal.config == JudgeConfig.paper() and not refusal.precheck
    default = DefusionJudge(ScriptedChatModel([]))
    assert default.config == EVALUATION_DEFAULTS and (default.followup, default.seed) == (True, 0)
