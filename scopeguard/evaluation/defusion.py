"""AutoDefuseEval: does a response to an out-of-scope question defuse it? (ELOQ appendix B.4-B.5)

The judge LLM reads the document, the question and the response, and ends with
``The answer is: Yes.`` (the response says the question cannot be answered from the document)
or ``No.`` (it attempts an answer). Following ELOQ, the judge is sampled ``votes`` times
(self-consistency) and the majority wins; with ``adaptive=True`` voting stops early once the
outcome is settled (see :func:`scopeguard.voting.vote`). A judgement no vote could parse is
``None`` (unknown), never a label.

Improvement over the paper (on by default, ``followup=False`` turns it off): a sampled reply
that ends without a parseable verdict gets one short greedy follow-up turn (template
``final_answer_followup``: "give your final verdict now"), the answer-extraction step of
Zero-shot-CoT. Small models often reason, or echo the instruction, and never conclude; the
follow-up is recorded with its sample and counted in ``llm_calls``. Sampling is seeded
(``seed``, default 0), so a re-run draws the same votes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatModel
from scopeguard.prompts import render, render_documents
from scopeguard.types import Document

__all__ = ["DefusionJudge", "JudgeSample", "Judgement"]


class JudgeSample(BaseModel):
    """One sampled judge reply and what it parsed to (``None``: no final answer found)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw: str
    parsed: str | None
    followup: str | None = None


class Judgement(BaseModel):
    """The outcome of a voted yes/no judgement about one response.

    ``value`` is ``True`` for "yes" (defused / refused, depending on the judge), ``False`` for
    "no", ``None`` when no vote could be parsed. ``method`` says whether an LLM voted or the
    lexical pre-check decided without one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: bool | None
    share: float = 0.0
    counts: dict[str, int] = Field(default_factory=dict)
    samples: tuple[JudgeSample, ...] = ()
    llm_calls: int = 0
    method: Literal["llm", "lexical"] = "llm"


def voted_judgement(
    llm: ChatModel,
    prompt: str,
    *,
    votes: int,
    temperature: float,
    adaptive: bool,
    max_tokens: int | None,
    followup: bool = True,
    seed: int | None = 0,
) -> Judgement:
    """Sample ``llm`` on ``prompt`` with self-consistency voting and parse yes/no answers.

    With ``followup``, a sample without a verdict gets one greedy follow-up turn asking for it.
    """
    from scopeguard.parsing import parse_final_answer
    from scopeguard.voting import followup_conversation, vote

    result = vote(
        llm,
        prompt,
        parse=lambda text: parse_final_answer(text, ("yes", "no")),
        m=votes,
        temperature=temperature,
        adaptive=adaptive,
        max_tokens=max_tokens,
        seed=seed,
        followup=followup_conversation(prompt) if followup else None,
    )
    value = None if result.winner is None else result.winner == "yes"
    samples = tuple(
        JudgeSample(raw=raw, parsed=parsed, followup=f)
        for (raw, parsed), f in zip(result.samples, result.followups, strict=True)
    )
    return Judgement(
        value=value,
        share=float(result.share),
        counts=dict(result.counts),
        samples=samples,
        llm_calls=int(result.llm_calls),
    )


class _VotingJudge:
    template: str = ""

    def __init__(
        self,
        llm: str | ChatModel = "local",
        *,
        votes: int = 3,
        temperature: float = 0.7,
        adaptive: bool = True,
        max_tokens: int | None = 256,
        followup: bool = True,
        seed: int | None = 0,
    ) -> None:
        if votes < 1:
            raise ConfigurationError(f"votes must be at least 1, got {votes}")
        from scopeguard.llm.registry import from_spec

        self.llm: ChatModel = from_spec(llm)
        self.votes = votes
        self.temperature = temperature
        self.adaptive = adaptive
        self.max_tokens = max_tokens
        self.followup = followup
        self.seed = seed

    def _vote(self, prompt: str) -> Judgement:
        return voted_judgement(
            self.llm,
            prompt,
            votes=self.votes,
            temperature=self.temperature,
            adaptive=self.adaptive,
            max_tokens=self.max_tokens,
            followup=self.followup,
            seed=self.seed,
        )


class DefusionJudge(_VotingJudge):
    """Judges whether ``response`` defuses the out-of-scope ``question`` (True = defused)."""

    template = "defusion_judgement"

    def build_prompt(self, question: str, documents: Sequence[Document], response: str) -> str:
        return render(
            self.template, document=render_documents(documents), question=question, response=response
        )

    def judge(self, question: str, documents: Sequence[Document], response: str) -> Judgement:
        return self._vote(self.build_prompt(question, documents, response))
