"""The prompted LLM judge: ELOQ's "Direct Generate" with self-consistency voting.

The reference method (Peng et al., SIGIR 2025, appendix B.3; template ``oos_judgement``) asks
whether the question contains confusing parts not present in the document and ends with
"The answer is: Yes or No". **Yes = out of scope.** ``m`` samples are drawn at ``temperature``
and the majority decides.

What this implementation adds over the reference:

* a strict parser (:func:`scopeguard.parsing.parse_final_answer`): a sample without a final
  "The answer is: Yes/No" is an ``unknown`` vote, never a default label;
* adaptive voting (:func:`scopeguard.voting.vote`): sampling stops once the majority cannot
  change; ``Verdict.llm_calls`` reports the generations a verdict cost;
* a verdict whose majority is ``unknown`` (or a tie) is ``unknown`` with ``score=None``;
  otherwise ``score`` is the out-of-scope share of the parsed votes (unknown votes excluded);
* connection failures propagate as :class:`~scopeguard.errors.LLMConnectionError` so the
  :class:`~scopeguard.Guard`'s ``on_error`` applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scopeguard.detectors.base import BaseDetector
from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatModel
from scopeguard.llm.registry import from_spec
from scopeguard.parsing import parse_final_answer, split_rationale
from scopeguard.prompts import available_templates, render, render_documents
from scopeguard.types import Document, Label, Verdict, Vote
from scopeguard.voting import VoteResult, avote, followup_conversation, vote

__all__ = ["JudgeDetector"]

_LABELS: dict[str | None, Label] = {"yes": "out_of_scope", "no": "in_scope", None: "unknown"}


def _parse_yes_no(text: str) -> str | None:
    return parse_final_answer(text, ("yes", "no"))


class JudgeDetector(BaseDetector):
    """Ask an LLM whether the question has parts the documents do not cover.

    Args:
        llm: a :class:`~scopeguard.llm.ChatModel` or a spec string (``"local"``,
            ``"local:/path.gguf"``, ``"openai:gpt-4o-mini"``).
        votes: the maximum number of samples ``m`` (1 = a single judgement).
        temperature: sampling temperature (use 0.0 with ``votes=1`` for greedy).
        adaptive: stop sampling once the majority can no longer change.
        template: the prompt template; it receives ``document`` and ``question``. The default
            is the paper's; ``oos_judgement_strict`` is this library's variant.
        max_tokens: the cap on each reply (the prompt asks for reasoning first).
        seed: a base seed for reproducible sampling where the backend honours seeds.
        followup: give a sample without a verdict one short greedy follow-up turn that asks for
            it (scopeguard's addition, off by default: the paper's judge has none).
    """

    name = "judge"

    def __init__(
        self,
        llm: str | ChatModel = "local",
        *,
        votes: int = 3,
        temperature: float = 0.7,
        adaptive: bool = True,
        template: str = "oos_judgement",
        max_tokens: int | None = 256,
        seed: int | None = None,
        followup: bool = False,
    ) -> None:
        if not isinstance(votes, int) or votes < 1:
            raise ConfigurationError(f"votes must be a positive integer, got {votes!r}")
        if temperature < 0:
            raise ConfigurationError(f"temperature must be >= 0, got {temperature}")
        if template not in available_templates():
            raise ConfigurationError(
                f"unknown prompt template {template!r}; available: {', '.join(available_templates())}"
            )
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be positive, got {max_tokens}")
        self.llm: ChatModel = from_spec(llm)
        self.votes = votes
        self.temperature = temperature
        self.adaptive = adaptive
        self.template = template
        self.max_tokens = max_tokens
        self.seed = seed
        self.followup = followup

    def prompt(self, question: str, documents: Sequence[Document]) -> str:
        """The rendered judgement prompt (documents joined into the single document slot)."""
        return render(self.template, document=render_documents(documents), question=question)

    def _verdict(self, result: VoteResult) -> Verdict:
        votes = tuple(
            Vote(label=_LABELS[choice], rationale=split_rationale(raw), raw=raw, followup=f)
            for (raw, choice), f in zip(result.samples, result.followups, strict=True)
        )
        label = _LABELS[result.winner]
        yes, no = result.counts.get("yes", 0), result.counts.get("no", 0)
        score = yes / (yes + no) if label != "unknown" and yes + no else None
        if label == "unknown":
            rationale = f"no majority verdict (votes: {dict(sorted(result.counts.items()))})"
        else:
            rationale = next(v.rationale for v in votes if v.label == label)
        return Verdict(
            label=label,
            score=score,
            rationale=rationale,
            votes=votes,
            detector=self.name,
            llm_calls=result.llm_calls,
        )

    def _vote_args(self, question: str, documents: Sequence[Document]) -> dict[str, Any]:
        prompt = self.prompt(question, documents)
        return {
            "llm": self.llm,
            "prompt": prompt,
            "parse": _parse_yes_no,
            "m": self.votes,
            "temperature": self.temperature,
            "adaptive": self.adaptive,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "followup": followup_conversation(prompt) if self.followup else None,
        }

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        return self._verdict(vote(**self._vote_args(question, documents)))

    async def _adetect(self, question: str, documents: Sequence[Document]) -> Verdict:
        return self._verdict(await avote(**self._vote_args(question, documents)))
