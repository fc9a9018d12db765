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
* Truncation: a sample that stopped at ``max_tokens`` (``finish_reason == "length"``) is
  counted in ``truncated``. With ``retry_truncated`` (the default) such a sample without a
  verdict is drawn once more without the cap (same seed), and that reply replaces it
  (``retried`` counts these); only then does the follow-up apply. Without the retry it stays an
  ``unknown`` vote, reported as truncated.

The knobs are :class:`scopeguard.judging.JudgeConfig`'s (``config.vote_kwargs()``), validated there.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from scopeguard.errors import DocumentTooLongError, LLMResponseError
from scopeguard.judging import JudgeConfig
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
    truncated: tuple[bool, ...] = ()
    """Per sample: the reply stopped at the ``max_tokens`` cap (before any uncapped retry)."""
    retried: int = 0
    """Truncated samples without a verdict that were drawn again without the cap."""


def _check(m: int, temperature: float, max_tokens: int | None) -> None:
    JudgeConfig(votes=m, temperature=temperature, max_tokens=max_tokens)


class _Tally:
    """Counts votes and plans the next batch; shared by :func:`vote` and :func:`avote`."""

    def __init__(
        self,
        m: int,
        parse: Parser,
        adaptive: bool,
        followup: FollowUp | None = None,
        retry_truncated: bool = True,
    ) -> None:
        self.m = m
        self.parse = parse
        self.adaptive = adaptive
        self.followup = followup
        self.counts: Counter[str] = Counter()
        self.samples: list[tuple[str, str | None]] = []
        self.followups: dict[str, str] = {}
        self.completions: list[Completion] = []
        self.truncated: list[bool] = []
        self.retry_truncated = retry_truncated
        self.retried = 0
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

    def add(self, completion: Completion, asked: int) -> list[int]:
        """Record a batch; returns the indices of its samples."""
        self.requests += completion.requests
        self.completions.append(completion)
        texts = completion.texts[:asked]
        if not texts:
            raise LLMResponseError(f"{asked} samples requested but the model returned none")
        start = len(self.samples)
        reasons = completion.finish_reasons
        for i, text in enumerate(texts):
            choice = self.parse(text)
            self.samples.append((text, choice))
            self.truncated.append(i < len(reasons) and reasons[i] == "length")
            self.counts[choice if choice is not None else UNKNOWN] += 1
        return list(range(start, len(self.samples)))

    def to_retry(self, new: list[int], capped: bool) -> list[int]:
        """The new samples cut by the cap without a verdict (to draw again uncapped)."""
        if not (capped and self.retry_truncated):
            return []
        return [i for i in new if self.truncated[i] and self.samples[i][1] is None]

    def retry(self, index: int, completion: Completion) -> None:
        """Replace the truncated sample ``index`` by its uncapped redraw."""
        self.requests += completion.requests
        self.completions.append(completion)
        self.retried += 1
        if not completion.texts:
            return
        text = completion.texts[0]
        choice = self.parse(text)
        self.samples[index] = (text, choice)
        if choice is not None:
            self._move(UNKNOWN, choice)

    def pending(self, new: list[int]) -> list[str]:
        """Apply known follow-ups to the new verdict-less samples; return the replies that still
        need one (each distinct reply once)."""
        waiting: list[str] = []
        for i in new:
            text, choice = self.samples[i]
            if choice is not None:
                continue
            if text in self.followups:
                again = self.parse(self.followups[text]) if self.followups[text] else None
                if again is not None:
                    self.samples[i] = (text, again)
                    self._move(UNKNOWN, again)
            elif self.followup is not None:
                waiting.append(text)
        return list(dict.fromkeys(waiting))

    def _move(self, old: str, new: str) -> None:
        self.counts[old] -= 1
        self.counts[new] += 1
        if self.counts[old] <= 0:
            del self.counts[old]

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
                self._move(UNKNOWN, choice)

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
            llm_calls=n + self.followup_calls + self.retried,
            share=(self.counts[winner] / n) if winner is not None and n else 0.0,
            requests=self.requests,
            stopped_early=n < self.m,
            completions=tuple(self.completions),
            followups=tuple(self.followups.get(raw) for raw, _ in self.samples),
            truncated=tuple(self.truncated),
            retried=self.retried,
        )


def _seed(seed: int | None, offset: int) -> int | None:
    return None if seed is None else seed + offset


@dataclass(frozen=True)
class _Call:
    """One request of a vote: the arguments of ``llm.complete`` (``llm.acomplete``)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


_Reply = Completion | DocumentTooLongError | None
"""What a request gave: its completion, or the DocumentTooLongError it raised."""
_Steps = Generator[_Call, _Reply, VoteResult]


def _steps(
    llm: ChatModel,
    prompt: Prompt,
    parse: Parser,
    m: int,
    temperature: float,
    adaptive: bool,
    max_tokens: int | None,
    seed: int | None,
    followup: FollowUp | None,
    retry_truncated: bool,
) -> _Steps:
    """The vote as a sequence of requests: yields each call, is sent what it gave, returns the
    result. :func:`vote` and :func:`avote` only do the I/O."""
    _check(m, temperature, max_tokens)
    tally = _Tally(m, parse, adaptive, followup, retry_truncated)
    batched = bool(getattr(llm, "supports_n", True))
    while not tally.decided():
        k = tally.next_batch()
        for size in [k] if batched else [1] * k:
            done = len(tally.samples)
            ask = {"n": size, "temperature": temperature, "max_tokens": max_tokens, "seed": _seed(seed, done)}
            new = tally.add(_completed((yield _Call((prompt,), ask))), size)
            for i in tally.to_retry(new, max_tokens is not None):
                redraw = yield _Call((prompt,), {"temperature": temperature, "seed": _seed(seed, i)})
                tally.retry(i, _completed(redraw))
            for text in tally.pending(new):
                reply = yield _Call((), tally.followup_call(text, seed))
                # a follow-up whose reply filled the window: no room to ask again
                tally.resolve(text, None if isinstance(reply, DocumentTooLongError) else _completed(reply))
    return tally.result()


def _completed(reply: _Reply) -> Completion:
    """The completion of a sample request; the error it raised is raised again."""
    if isinstance(reply, DocumentTooLongError):
        raise reply
    assert reply is not None
    return reply


def _advance(steps: _Steps, reply: _Reply) -> _Call | VoteResult:
    """Send ``reply`` to the vote; its next request, or its result once it is done."""
    try:
        return steps.send(reply)
    except StopIteration as done:
        result: VoteResult = done.value
        return result


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
    retry_truncated: bool = True,
) -> VoteResult:
    """Sample up to ``m`` replies to ``prompt`` and return the majority (see module docs)."""
    steps = _steps(llm, prompt, parse, m, temperature, adaptive, max_tokens, seed, followup, retry_truncated)
    step = _advance(steps, None)
    while isinstance(step, _Call):
        try:
            reply: _Reply = llm.complete(*step.args, **step.kwargs)
        except DocumentTooLongError as exc:
            reply = exc
        step = _advance(steps, reply)
    return step


async def avote(llm: ChatModel, prompt: Prompt, **options: Any) -> VoteResult:
    """Async twin of :func:`vote`: the same keyword options with the same defaults (an unknown
    one is a TypeError), the same rules, ``llm.acomplete``."""
    bound = inspect.signature(vote).bind(llm, prompt, **options)
    bound.apply_defaults()
    steps = _steps(**bound.arguments)
    step = _advance(steps, None)
    while isinstance(step, _Call):
        try:
            reply: _Reply = await llm.acomplete(*step.args, **step.kwargs)
        except DocumentTooLongError as exc:
            reply = exc
        step = _advance(steps, reply)
    return step


def followup_conversation(prompt: Prompt, template: str = "final_answer_followup") -> FollowUp:
    """A ``followup`` for :func:`vote`: the prompt, the model's reply, then ``template`` as a new turn."""
    from scopeguard.llm.base import ChatMessage, to_messages
    from scopeguard.prompts import render

    ask = render(template)
    head = to_messages(prompt)

    def build(reply: str) -> Prompt:
        return [*head, ChatMessage(role="assistant", content=reply), ChatMessage(role="user", content=ask)]

    return build
