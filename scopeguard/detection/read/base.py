"""Log-prob verdicts: ask an LLM a Yes/No question and read the answer's probability in one pass.

No text is generated and nothing is parsed: the model reads the prompt once and the
next-token log-probabilities of the verdict words give the score. The answer words come in
several token forms ("Yes", " Yes", "yes", ...); every single-token variant a tokenizer has is
counted (their probabilities are summed), so the score does not depend on which form the
model prefers.

``margin`` = log P(No) - log P(Yes), with P(No) and P(Yes) the summed probabilities of the
variants. A positive margin leans towards "No" (for the answerability question: out of scope).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from scopeguard.llm.base import ChatMessage

__all__ = [
    "NO_WORDS",
    "YES_WORDS",
    "VerdictScore",
    "VerdictScorer",
    "logsumexp",
    "score_from_top_logprobs",
    "variant_strings",
    "verdict_from_logits",
]

YES_WORDS: tuple[str, ...] = ("Yes", "yes", "YES")
NO_WORDS: tuple[str, ...] = ("No", "no", "NO")
_FLOOR = -30.0  # log-prob used for a verdict word absent from a truncated top-k list


def variant_strings(words: Iterable[str]) -> list[str]:
    """The token strings to look up for each verdict word: bare and with a leading space."""
    out: list[str] = []
    for w in words:
        for v in (w, " " + w):
            if v not in out:
                out.append(v)
    return out


def logsumexp(values: Sequence[float]) -> float:
    if not values:
        return -math.inf
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


@dataclass(frozen=True)
class VerdictScore:
    """The verdict words' probabilities after one forward pass.

    ``logp_yes`` / ``logp_no``: log of the summed probability of each answer's token variants.
    ``coverage``: P(Yes) + P(No), how much of the next-token mass the two answers hold (a low
    value means the model wanted to say something else, and the margin is less trustworthy).
    ``hidden``: the model's hidden states at the verdict position, one row per layer asked for
    (``layers=`` of a scorer that reads them, from the same forward pass), else ``None``.
    """

    logp_yes: float
    logp_no: float
    n_tokens: int = 0
    hidden: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def margin(self) -> float:
        """log P(No) - log P(Yes)."""
        return self.logp_no - self.logp_yes

    @property
    def p_no(self) -> float:
        """P(No) / (P(Yes) + P(No))."""
        m = max(-50.0, min(50.0, self.margin))
        return 1.0 / (1.0 + math.exp(-m))

    @property
    def coverage(self) -> float:
        return math.exp(self.logp_yes) + math.exp(self.logp_no)


def score_from_top_logprobs(top: Mapping[str, float], *, n_tokens: int = 0) -> VerdictScore | None:
    """A :class:`VerdictScore` from a top-k map token -> log-prob (an API's ``top_logprobs``).

    Token strings are compared after stripping whitespace, so "Yes", " Yes" and "Yes\\n" count
    alike. ``None`` when neither answer is in the list. When only one is, the other is bounded
    by the smallest listed log-prob (it ranked below all of them).
    """
    yes = [lp for tok, lp in top.items() if tok.strip() in YES_WORDS]
    no = [lp for tok, lp in top.items() if tok.strip() in NO_WORDS]
    if not yes and not no:
        return None
    floor = min(top.values()) if top else _FLOOR
    floor = min(floor, _FLOOR) if not math.isfinite(floor) else floor
    return VerdictScore(
        logp_yes=logsumexp(yes) if yes else floor,
        logp_no=logsumexp(no) if no else floor,
        n_tokens=n_tokens,
    )


@runtime_checkable
class VerdictScorer(Protocol):
    """One forward pass per prompt; the verdict words' log-probabilities of the next token."""

    @property
    def name(self) -> str: ...

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore: ...

    def score_many(
        self, prompts: Sequence[Sequence[ChatMessage]], *, progress: bool | None = None
    ) -> list[VerdictScore]: ...

    def count_tokens(self, text: str) -> int: ...


def verdict_from_logits(
    logits: np.ndarray,
    yes: Sequence[int],
    no: Sequence[int],
    *,
    n_tokens: int,
    hidden: np.ndarray | None = None,
) -> VerdictScore:
    """The verdict from one row of next-token logits: log-softmax, then the Yes and No token ids'
    probabilities summed (``yes``, ``no``: the model's single-token ids of each word)."""
    top = float(logits.max())
    log_z = top + math.log(float(np.exp(logits - top).sum()))
    return VerdictScore(
        logp_yes=logsumexp([float(logits[i]) - log_z for i in yes]),
        logp_no=logsumexp([float(logits[i]) - log_z for i in no]),
        n_tokens=n_tokens,
        hidden=hidden,
    )
