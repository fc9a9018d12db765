"""AutoDefuseEval: does a response to an out-of-scope question defuse it? (ELOQ appendix B.4-B.5)

The judge LLM reads the document, the question and the response, and ends with
``The answer is: Yes.`` (the response says the question cannot be answered from the document)
or ``No.`` (it attempts an answer). Following ELOQ, the judge is sampled ``votes`` times
(self-consistency) and the majority wins; with ``adaptive=True`` voting stops early once the
outcome is settled (see :func:`scopeguard.voting.vote`). A judgement no vote could parse is
``None`` (unknown), never a label.

The judge's knobs are a :class:`~scopeguard.judging.JudgeConfig` (``config=``, or the individual
keywords); the default is :data:`~scopeguard.judging.EVALUATION_DEFAULTS` and
``JudgeConfig.paper()`` is AutoDefuseEval as published (m=9, every vote drawn, no follow-up, no
reply cap). :func:`paper_evaluation_settings` is the whole evaluation's paper preset.

Improvement over the paper (on by default, ``followup=False`` turns it off): a sampled reply
that ends without a parseable verdict gets one short greedy follow-up turn (template
``final_answer_followup``: "give your final verdict now"), the answer-extraction step of
Zero-shot-CoT. Small models often reason, or echo the instruction, and never conclude; the
follow-up is recorded with its sample and counted in ``llm_calls``. Sampling is seeded
(``seed``, default 0), so a re-run draws the same votes.

A reply cut by the reply cap is counted in ``Judgement.truncated`` (and marked on its sample);
one without a verdict is drawn again without the cap (``JudgeConfig.retry_truncated``), so the
cap never silently turns a judgement into unknown and drops the question from the rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scopeguard.judging import EVALUATION_DEFAULTS, ConfiguredJudge, JudgeConfig, JudgeSettings
from scopeguard.llm.base import ChatModel
from scopeguard.prompts import render, render_documents
from scopeguard.types import Document

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DefusionJudge", "JudgeSample", "Judgement", "paper_evaluation_settings"]


def paper_evaluation_settings() -> dict[str, Any]:
    """The evaluation's paper preset (ELOQ Algorithm 2 with section 4.4's m=9), as the
    ``evaluate()`` / ``RunConfig`` settings: the judges are ``JudgeConfig.paper()`` (9 votes, all
    drawn, no follow-up turn), no lexical pre-check, and no cap on any reply (``max_tokens=None``
    covers the RAG responses too, so Zero-shot-CoT's reasoning is never cut)."""
    paper = JudgeConfig.paper()
    return {
        "votes": paper.votes,
        "adaptive": paper.adaptive,
        "temperature": paper.temperature,
        "followup": paper.followup,
        "max_tokens": paper.max_tokens,
        "precheck": False,
    }


class JudgeSample(BaseModel):
    """One sampled judge reply and what it parsed to (``None``: no final answer found)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw: str
    parsed: str | None
    followup: str | None = None
    truncated: bool = False
    """The reply stopped at the reply cap (``raw`` is its uncapped redraw when one was drawn)."""


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
    truncated: int = 0
    """Sampled replies that stopped at the reply cap (before any uncapped redraw)."""


def _voted_judgement(llm: ChatModel, prompt: str, config: JudgeConfig) -> Judgement:
    """Sample ``llm`` on ``prompt`` with self-consistency voting and parse yes/no answers.

    With ``config.followup``, a sample without a verdict gets one greedy follow-up turn asking for it.
    """
    from scopeguard.parsing import parse_final_answer
    from scopeguard.voting import followup_conversation, vote

    result = vote(
        llm,
        prompt,
        parse=lambda text: parse_final_answer(text, ("yes", "no")),
        followup=followup_conversation(prompt) if config.followup else None,
        **config.vote_kwargs(),
    )
    value = None if result.winner is None else result.winner == "yes"
    samples = tuple(
        JudgeSample(raw=raw, parsed=parsed, followup=f, truncated=t)
        for (raw, parsed), f, t in zip(result.samples, result.followups, result.truncated, strict=True)
    )
    return Judgement(
        value=value,
        share=float(result.share),
        counts=dict(result.counts),
        samples=samples,
        llm_calls=int(result.llm_calls),
        truncated=sum(result.truncated),
    )


class _VotingJudge(ConfiguredJudge):
    """A voted yes/no judge over a named template; knobs in ``self.config`` (a JudgeConfig)."""

    template: str = ""

    def __init__(
        self,
        llm: str | ChatModel = "local",
        *,
        config: JudgeConfig | None = None,
        **settings: Unpack[JudgeSettings],
    ) -> None:
        from scopeguard.llm.registry import from_spec

        self.config = JudgeConfig.build(config, EVALUATION_DEFAULTS, **settings)
        self.llm: ChatModel = from_spec(llm)

    def _vote(self, prompt: str) -> Judgement:
        return _voted_judgement(self.llm, prompt, self.config)


class DefusionJudge(_VotingJudge):
    """Judges whether ``response`` defuses the out-of-scope ``question`` (True = defused).

    Knobs: ``config=`` a :class:`~scopeguard.judging.JudgeConfig` (default
    :data:`~scopeguard.judging.EVALUATION_DEFAULTS`) or the keywords ``votes``, ``temperature``,
    ``adaptive``, ``max_tokens`` (``None``: no cap), ``followup``, ``seed``.
    """

    template = "defusion_judgement"

    def build_prompt(self, question: str, documents: Sequence[Document], response: str) -> str:
        return render(
            self.template, document=render_documents(documents), question=question, response=response
        )

    def judge(self, question: str, documents: Sequence[Document], response: str) -> Judgement:
        return self._vote(self.build_prompt(question, documents, response))
