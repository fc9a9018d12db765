"""False refusals: did a response to an in-scope question refuse, or claim the answer is missing?

The paper measures only defusion of out-of-scope questions; a RAG system that says "the
document does not say" to everything would score perfectly there. :class:`RefusalJudge` asks a
judge LLM (template ``refusal_judgement``, same voting as the defusion judge) whether the
response refuses or claims that the information is missing; ``True`` means refused.

A cheap lexical pre-check (:func:`lexical_refusal`) decides the obvious cases without an LLM:

* a response of at most 60 words whose first sentence carries a refusal phrase ("cannot be
  answered", "does not mention", "no information", ...) is a refusal (sentences as
  :func:`scopeguard.verification.split_sentences` cuts them: an abbreviation or an initial does
  not end one, a line break does);
* a response with no negation or missing-information cue at all (no "not", "n't", "no",
  "cannot", "unknown", "unclear", "unable", "missing", "none", "neither") is an answer.

Everything else goes to the LLM. Pass ``precheck=False`` to always ask the LLM.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from scopeguard._sentences import sentence_spans
from scopeguard.evaluation.defusion import Judgement, _VotingJudge
from scopeguard.judging import JudgeConfig, JudgeSettings
from scopeguard.llm.base import ChatModel

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["RefusalJudge", "lexical_refusal"]

_REFUSAL = re.compile(
    r"\b(?:"
    r"(?:can ?not|can't|could not|couldn't|unable to) (?:be )?(?:answer(?:ed)?|determine[d]?|tell|say|find)"
    r"|(?:does|do|did) (?:not|n't) (?:mention|provide|specify|say|state|contain|include|discuss|indicate|"
    r"address|give|offer)"
    r"|doesn't (?:mention|provide|specify|say|state|contain|include|discuss|indicate|address|give|offer)"
    r"|(?:is|are|was|were) not (?:mentioned|provided|specified|stated|available|given|included|discussed)"
    r"|not (?:mentioned|provided|specified|stated|available|given|included|discussed) in the"
    r"|no (?:information|mention|details?|data|indication|evidence)"
    r"|there is no (?:mention|information|indication)"
    r"|(?:not|no) enough information|insufficient information"
    r")\b",
    re.IGNORECASE,
)
_NEGATION = re.compile(
    r"\b(?:not|no|none|neither|nor|cannot|unknown|unclear|unable|missing|unanswerable)\b|n't\b",
    re.IGNORECASE,
)
_MAX_REFUSAL_WORDS = 60


def lexical_refusal(response: str) -> bool | None:
    """``True``: an obvious refusal; ``False``: obviously an answer; ``None``: ask the LLM."""
    text = response.strip()
    if not text:
        return None
    start, end = sentence_spans(text)[0]
    first = text[start:end]
    if len(text.split()) <= _MAX_REFUSAL_WORDS and _REFUSAL.search(first):
        return True
    if not _NEGATION.search(text):
        return False
    return None


class RefusalJudge(_VotingJudge):
    """Judges whether ``response`` refuses ``question`` or says the information is missing.

    The voting knobs are the defusion judge's (``config=`` or the keywords, see
    :class:`~scopeguard.evaluation.DefusionJudge`); ``precheck`` adds the lexical pre-check.
    """

    template = "refusal_judgement"

    def __init__(
        self,
        llm: str | ChatModel = "local",
        *,
        config: JudgeConfig | None = None,
        precheck: bool = True,
        **settings: Unpack[JudgeSettings],
    ) -> None:
        super().__init__(llm, config=config, **settings)
        self.precheck = precheck

    def build_prompt(self, question: str, response: str) -> str:
        from scopeguard.prompts import render

        return render(self.template, question=question, response=response)

    def judge(self, question: str, response: str) -> Judgement:
        if self.precheck:
            obvious = lexical_refusal(response)
            if obvious is not None:
                return Judgement(value=obvious, share=1.0, method="lexical")
        return self._vote(self.build_prompt(question, response))
