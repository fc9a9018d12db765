"""Self-consistency voting over sampled LLM replies, with adaptive early stopping.

:func:`vote` samples up to ``m`` replies to one prompt, parses each into a choice (or ``None``:
an *unknown* vote) and returns the majority.

Rules (the same for sync :func:`vote` and async :func:`avote`):

* Unparseable samples count as ``unknown`` votes. ``unknown`` competes like any choice: the
  winner is the label with strictly more votes than every other label, and a verdict whose
  majority (or tie) involves ``unknown`` has no winner (``winner is None``). So 2 "yes" + 1
  unparseable wins "yes"; 1 "yes" + 1 "no" + 1 unparseable has no winner; a yes/no tie has none.
* Adaptive stopping: after each batch, stop as soon as the leader can no longer be caught by
  the runner-up with the samples still allowed (``lead > remaining``). With ``m=3``, two agreeing
  first samples end the vote after 2 generations.
* Batching: each round asks for the fewest further samples that could settle the vote (2 of 3
  first; then 1), in one ``n``-request where the backend samples ``n`` at once
  (``supports_n`` attribute, default true), otherwise one request per sample.
* ``llm_calls`` counts generations (samples drawn, plus follow-ups), the cost that adaptive
  stopping saves; ``requests`` counts round trips.
* Follow-up (optional, scopeguard's addition): with ``followup`` set, a sample that does not
  parse gets one greedy follow-up turn, ``followup(reply)`` (a conversation that asks for the
  verdict alone), and that reply is parsed instead. Identical replies share one follow-up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scopeguard.errors import ConfigurationError, DocumentTooLongError, LLMResponseError
from scopeguard.llm.base import ChatModel, Completion, Prompt

__all__ = ["UNKNOWN", "VoteResult", "avote", "followup_conversation", "vote"]

UNKNOWN = "unknown"
Parser = Callable[[str], "str | None"]
FollowUp = Callable[[str], Prompt]
FOLLOWUP_MAX_TOKENS = 24


@dataclass(frozen=True)
class VoteResult:
    """The outcome of a vote.

    ``counts`` maps each parsed choice (and ``"unknown"`` for unparseable samples) to its
    votes; ``samples`` holds every ``(raw reply, parsed choice or None)`` in order; ``share`` is
    the winner's share of all samples (0.0 when there is no winner).
    """

    winner: str | None
    counts: dict[str, int]
    samples: tuple[tuple[str, str | None], ...]
    llm_calls: int
    share: float
    requests: int = 0
    stopped_early: bool = False
    completions: tuple[Completion, ...] = field(default=(), repr=False)
    followups: tuple[str | None, ...] = ()


def _check(m: int, temperature: float) -> None:
    if not isinstance(m, int) or m < 1:
        raise ConfigurationError(f"the number of votes m must be a positive integer, got {m!r}")
    if temperature < 0:
        raise ConfigurationError(f"temperature must be >= 0, got {temperature}")


class _Tally:
    """Counts votes and plans the next batch; shared by :func:`vote` and :func:`avote`."""

    def __init__(self, m: int, parse: Parser, adaptive: bool, followup: FollowUp | None = None) -> None:
        self.m = m
        self.parse = parse
        self.adaptive = adaptive
        self.followup = followup
        self.counts: Counter[str] = Counter()
        self.samples: list[tuple[str, str | None]] = []
        self.followups: dict[str, str] = {}
        self.completions: list[Completion] = []
        self.requests = 0
        self.followup_calls = 0

    def _ranked(self) -> tuple[int, int]:
        top = [c for _, c in self.counts.most_common(2)] + [0, 0]
        return top[0], top[1]

    def decided(self) -> bool:
        remaining = self.m - len(self.samples)
        if remaining <= 0:
            return True
        if not self.adaptive:
            return False
        lead, second = self._ranked()
        return lead - second > remaining

    def next_batch(self) -> int:
        """The fewest further samples after which the vote could be settled."""
        remaining = self.m - len(self.samples)
        if not self.adaptive:
            return remaining
        lead, second = self._ranked()
        # all x new votes to the leader: lead + x - second > remaining - x
        needed = max(1, (second + remaining - lead) // 2 + 1)
        return min(needed, remaining)

    def add(self, completion: Completion, asked: int) -> list[str]:
        """Record a batch; returns the unparseable replies that still need a follow-up."""
        self.requests += completion.requests
        self.completions.append(completion)
        texts = completion.texts[:asked]
        if not texts:
            raise LLMResponseError(f"{asked} samples requested but the model returned none")
        pending: list[str] = []
        for text in texts:
            choice = self.parse(text)
            if choice is None and text in self.followups:
                choice = self.parse(self.followups[text])
            elif choice is None and self.followup is not None:
                pending.append(text)
            self.samples.append((text, choice))
            self.counts[choice if choice is not None else UNKNOWN] += 1
        return list(dict.fromkeys(pending))

    def followup_call(self, text: str, seed: int | None) -> dict[str, Any]:
        """Arguments of the greedy follow-up request for the unparseable reply ``text``."""
        assert self.followup is not None
        return {
            "prompt": self.followup(text),
            "temperature": 0.0,
            "max_tokens": FOLLOWUP_MAX_TOKENS,
            "seed": seed,
        }

    def resolve(self, text: str, completion: Completion | None) -> None:
        """Apply a follow-up reply (``None``: it could not be asked) to the samples ``text``."""
        reply = completion.texts[0] if completion is not None and completion.texts else ""
        self.followups[text] = reply
        self.followup_calls += completion is not None
        self.requests += completion.requests if completion is not None else 0
        choice = self.parse(reply) if reply else None
        if choice is None:
            return
        for i, (raw, parsed) in enumerate(self.samples):
            if raw == text and parsed is None:
                self.samples[i] = (raw, choice)
                self.counts[UNKNOWN] -= 1
                self.counts[choice] += 1
        if self.counts[UNKNOWN] <= 0:
            del self.counts[UNKNOWN]

    def result(self) -> VoteResult:
        lead, second = self._ranked()
        winner: str | None = None
        if lead > second:
            top = self.counts.most_common(1)[0][0]
            winner = None if top == UNKNOWN else top
        n = len(self.samples)
        return VoteResult(
            winner=winner,
            counts=dict(self.counts),
            samples=tuple(self.samples),
            llm_calls=n + self.followup_calls,
            share=(self.counts[winner] / n) if winner is not None and n else 0.0,
            requests=self.requests,
            stopped_early=n < self.m,
            completions=tuple(self.completions),
            followups=tuple(self.followups.get(raw) for raw, _ in self.samples),
        )


def _seed(seed: int | None, offset: int) -> int | None:
    return None if seed is None else seed + offset


def vote(
    llm: ChatModel,
    prompt: Prompt,
    *,
    parse: Parser,
    m: int = 3,
    temperature: float = 0.7,
    adaptive: bool = True,
    max_tokens: int | None = None,
    seed: int | None = None,
    followup: FollowUp | None = None,
) -> VoteResult:
    """Sample up to ``m`` replies to ``prompt`` and return the majority (see module docs)."""
    _check(m, temperature)
    tally = _Tally(m, parse, adaptive, followup)
    batched = bool(getattr(llm, "supports_n", True))
    while not tally.decided():
        k = tally.next_batch()
        for size in [k] if batched else [1] * k:
            done = len(tally.samples)
            c = llm.complete(
                prompt, n=size, temperature=temperature, max_tokens=max_tokens, seed=_seed(seed, done)
            )
            for text in tally.add(c, size):
                try:
                    tally.resolve(text, llm.complete(**tally.followup_call(text, seed)))
                except DocumentTooLongError:  # the reply filled the window: no room to ask again
                    tally.resolve(text, None)
    return tally.result()


async def avote(
    llm: ChatModel,
    prompt: Prompt,
    *,
    parse: Parser,
    m: int = 3,
    temperature: float = 0.7,
    adaptive: bool = True,
    max_tokens: int | None = None,
    seed: int | None = None,
    followup: FollowUp | None = None,
) -> VoteResult:
    """Async twin of :func:`vote` (same rules, ``llm.acomplete``)."""
    _check(m, temperature)
    tally = _Tally(m, parse, adaptive, followup)
    batched = bool(getattr(llm, "supports_n", True))
    while not tally.decided():
        k = tally.next_batch()
        sizes = [k] if batched else [1] * k
        for size in sizes:
            done = len(tally.samples)
            c = await llm.acomplete(
                prompt, n=size, temperature=temperature, max_tokens=max_tokens, seed=_seed(seed, done)
            )
            for text in tally.add(c, size):
                try:
                    tally.resolve(text, await llm.acomplete(**tally.followup_call(text, seed)))
                except DocumentTooLongError:  # the reply filled the window: no room to ask again
                    tally.resolve(text, None)
    return tally.result()


def followup_conversation(prompt: Prompt, template: str = "final_answer_followup") -> FollowUp:
    """A ``followup`` for :func:`vote`: the prompt, the model's reply, then ``template`` as a new turn."""
    from scopeguard.llm.base import ChatMessage, to_messages
    from scopeguard.prompts import render

    ask = render(template)
    head = to_messages(prompt)

    def build(reply: str) -> Prompt:
        return [*head, ChatMessage(role="assistant", content=reply), ChatMessage(role="user", content=ask)]

    return build
