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
* ``llm_calls`` counts generations (samples drawn), the cost that adaptive stopping saves;
  ``requests`` counts round trips.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from scopeguard.errors import ConfigurationError, LLMResponseError
from scopeguard.llm.base import ChatModel, Completion, Prompt

__all__ = ["UNKNOWN", "VoteResult", "avote", "vote"]

UNKNOWN = "unknown"
Parser = Callable[[str], "str | None"]


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


def _check(m: int, temperature: float) -> None:
    if not isinstance(m, int) or m < 1:
        raise ConfigurationError(f"the number of votes m must be a positive integer, got {m!r}")
    if temperature < 0:
        raise ConfigurationError(f"temperature must be >= 0, got {temperature}")


class _Tally:
    """Counts votes and plans the next batch; shared by :func:`vote` and :func:`avote`."""

    def __init__(self, m: int, parse: Parser, adaptive: bool) -> None:
        self.m = m
        self.parse = parse
        self.adaptive = adaptive
        self.counts: Counter[str] = Counter()
        self.samples: list[tuple[str, str | None]] = []
        self.completions: list[Completion] = []
        self.requests = 0

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

    def add(self, completion: Completion, asked: int) -> None:
        self.requests += completion.requests
        self.completions.append(completion)
        texts = completion.texts[:asked]
        if not texts:
            raise LLMResponseError(f"{asked} samples requested but the model returned none")
        for text in texts:
            choice = self.parse(text)
            self.samples.append((text, choice))
            self.counts[choice if choice is not None else UNKNOWN] += 1

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
            llm_calls=n,
            share=(self.counts[winner] / n) if winner is not None and n else 0.0,
            requests=self.requests,
            stopped_early=n < self.m,
            completions=tuple(self.completions),
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
) -> VoteResult:
    """Sample up to ``m`` replies to ``prompt`` and return the majority (see module docs)."""
    _check(m, temperature)
    tally = _Tally(m, parse, adaptive)
    batched = bool(getattr(llm, "supports_n", True))
    while not tally.decided():
        k = tally.next_batch()
        for size in [k] if batched else [1] * k:
            done = len(tally.samples)
            c = llm.complete(
                prompt, n=size, temperature=temperature, max_tokens=max_tokens, seed=_seed(seed, done)
            )
            tally.add(c, size)
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
) -> VoteResult:
    """Async twin of :func:`vote` (same rules, ``llm.acomplete``)."""
    _check(m, temperature)
    tally = _Tally(m, parse, adaptive)
    batched = bool(getattr(llm, "supports_n", True))
    while not tally.decided():
        k = tally.next_batch()
        sizes = [k] if batched else [1] * k
        for size in sizes:
            done = len(tally.samples)
            c = await llm.acomplete(
                prompt, n=size, temperature=temperature, max_tokens=max_tokens, seed=_seed(seed, done)
            )
            tally.add(c, size)
    return tally.result()
