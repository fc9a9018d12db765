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
  :class:`~scopeguard.Guard`'s ``on_error`` applies;
* a sample cut by the reply cap is marked ``Vote.truncated`` and, without a verdict, drawn again
  uncapped (``JudgeConfig.retry_truncated``), so a cap never silently makes the verdict unknown;
  the rationale of a verdict with truncated samples says how many.

The knobs are a :class:`~scopeguard.judging.JudgeConfig` (``config=``, or the individual keywords
as before); ``JudgeDetector(llm, config=JudgeConfig.paper())`` is the paper's judge (m=9, every
vote drawn, no follow-up, no reply cap).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scopeguard.detection.detectors.base import BaseDetector
from scopeguard.errors import ConfigurationError
from scopeguard.judging import ConfiguredJudge, JudgeConfig, JudgeSettings
from scopeguard.llm.base import ChatModel
from scopeguard.llm.registry import from_spec
from scopeguard.parsing import parse_final_answer, split_rationale
from scopeguard.prompts import available_templates, render, render_documents
from scopeguard.types import Document, Label, Verdict, Vote
from scopeguard.voting import VoteResult, avote, followup_conversation, vote

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["JudgeDetector"]

_LABELS: dict[str | None, Label] = {"yes": "out_of_scope", "no": "in_scope", None: "unknown"}


def _parse_yes_no(text: str) -> str | None:
    return parse_final_answer(text, ("yes", "no"))


class JudgeDetector(ConfiguredJudge, BaseDetector):
    """Ask an LLM whether the question has parts the documents do not cover.

    Args:
        llm: a :class:`~scopeguard.llm.ChatModel` or a spec string (``"local"``,
            ``"local:/path.gguf"``, ``"openai:gpt-4o-mini"``).
        config: every voting knob at once (:class:`~scopeguard.judging.JudgeConfig`; default
            ``JudgeConfig()``: 3 adaptive votes at 0.7, 256-token cap, no follow-up).
            Or pass the knobs one by one (not together with ``config``):
        votes: the maximum number of samples ``m`` (1 = a single judgement).
        temperature: sampling temperature (use 0.0 with ``votes=1`` for greedy).
        adaptive: stop sampling once the majority can no longer change.
        max_tokens: the cap on each reply (the prompt asks for reasoning first); ``None``: none.
        seed: a base seed for reproducible sampling where the backend honours seeds.
        followup: give a sample without a verdict one short greedy follow-up turn that asks for
            it (scopeguard's addition, off by default: the paper's judge has none).
        template: the prompt template; it receives ``document`` and ``question``. The default
            is the paper's; ``oos_judgement_strict`` is this library's variant.
    """

    name = "judge"

    def __init__(
        self,
        llm: str | ChatModel = "local",
        *,
        config: JudgeConfig | None = None,
        template: str = "oos_judgement",
        **settings: Unpack[JudgeSettings],
    ) -> None:
        self.config = JudgeConfig.build(config, JudgeConfig(), **settings)
        if template not in available_templates():
            raise ConfigurationError(
                f"unknown prompt template {template!r}; available: {', '.join(available_templates())}"
            )
        self.llm: ChatModel = from_spec(llm)
        self.template = template

    def prompt(self, question: str, documents: Sequence[Document]) -> str:
        """The rendered judgement prompt (documents joined into the single document slot)."""
        return render(self.template, document=render_documents(documents), question=question)

    def _verdict(self, result: VoteResult) -> Verdict:
        votes = tuple(
            Vote(label=_LABELS[choice], rationale=split_rationale(raw), raw=raw, followup=f, truncated=t)
            for (raw, choice), f, t in zip(result.samples, result.followups, result.truncated, strict=True)
        )
        label = _LABELS[result.winner]
        yes, no = result.counts.get("yes", 0), result.counts.get("no", 0)
        score = yes / (yes + no) if label != "unknown" and yes + no else None
        if label == "unknown":
            rationale = f"no majority verdict (votes: {dict(sorted(result.counts.items()))})"
        else:
            rationale = next(v.rationale for v in votes if v.label == label)
        cut = sum(result.truncated)
        if cut:
            redrawn = f", {result.retried} drawn again without the cap" if result.retried else ""
            rationale += f" ({cut} of {len(votes)} replies hit the {self.max_tokens}-token cap{redrawn})"
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
            "followup": followup_conversation(prompt) if self.followup else None,
            **self.config.vote_kwargs(),
        }

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        return self._verdict(vote(**self._vote_args(question, documents)))

    async def _adetect(self, question: str, documents: Sequence[Document]) -> Verdict:
        return self._verdict(await avote(**self._vote_args(question, documents)))
