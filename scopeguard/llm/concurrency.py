"""Adaptive concurrency for OpenAI-compatible servers (vLLM, llama.cpp server, OpenAI...): AIMD.

:class:`AdaptiveLimiter` bounds the requests in flight and moves the bound the way TCP moves its
window:

- **slow start**: until the first congestion signal the limit grows by one per completed request
  while the limit binds (requests wait, or all slots are taken): it doubles every round trip;
- **additive increase**: after a signal it grows by ``1/limit`` per such request (one per round trip);
- **multiplicative decrease**: it is multiplied by ``backoff`` (0.7, as CUBIC does) on a rate
  limit (a 429, seen through ``rate_limits``, e.g. the counter :attr:`OpenAIChatModel.rate_limits
  <scopeguard.llm.openai_compat.OpenAIChatModel>`, or :meth:`AdaptiveLimiter.on_rate_limit`), and by
  ``latency_backoff`` when, over a round trip, the smoothed latency rose past ``latency_tolerance``
  times the lowest seen *and* the completion rate fell by half (the server slows down); with the
  latency up and the rate flat the limit holds (more requests in flight would only wait longer). Latency that
  rises while the rate still grows (a busy client event loop, a server still absorbing load) does
  not stop the growth. At most one decrease per round trip (requests that started before a
  decrease do not decrease it again).

:class:`LimitedChatModel` puts any :class:`~scopeguard.llm.base.ChatModel`'s async calls behind a
limiter (sync calls pass through). ``Generator(concurrency="auto")`` uses both.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from scopeguard.errors import ConfigurationError
from scopeguard.llm._wrapper import WrappedChatModel
from scopeguard.llm.base import ChatModel, Completion, Prompt, SamplingArgs, complete_keywords

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AdaptiveLimiter", "LimitedChatModel"]


class AdaptiveLimiter:
    """An AIMD limit on concurrent requests (see the module docstring).

    Args:
        initial, minimum, maximum: the limit's start and bounds.
        backoff: the factor of a decrease on a rate limit (0.7; 0.5 would halve, as Reno does).
        latency_backoff: the factor of a decrease on queueing (rising latency, flat rate).
        latency_tolerance: queueing when the smoothed latency exceeds this times the lowest seen.
        rate_limits: a function returning a count of rate-limit replies seen so far (an increase
            between two completions is a 429 signal), e.g. ``lambda: model.rate_limits``.
    """

    def __init__(
        self,
        *,
        initial: int = 32,
        minimum: int = 1,
        maximum: int = 512,
        backoff: float = 0.7,
        latency_backoff: float = 0.8,
        latency_tolerance: float = 2.0,
        rate_limits: Callable[[], int] | None = None,
    ) -> None:
        if not 1 <= minimum <= initial <= maximum:
            raise ConfigurationError(
                f"need 1 <= minimum <= initial <= maximum, got {minimum}, {initial}, {maximum}"
            )
        if not 0 < backoff < 1 or not 0 < latency_backoff < 1 or latency_tolerance <= 1:
            raise ConfigurationError(
                "backoff and latency_backoff must be in (0, 1) and latency_tolerance above 1"
            )
        self.minimum, self.maximum = minimum, maximum
        self.backoff, self.latency_backoff = backoff, latency_backoff
        self.latency_tolerance = latency_tolerance
        self._limit = float(initial)
        self._slow_start = True
        self._rate_limits = rate_limits
        self._seen_rate_limits = rate_limits() if rate_limits is not None else 0
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._samples = 0
        self._baseline: float | None = None
        self._smoothed: float | None = None
        self._window_start: float | None = None  # the current round trip's first completion
        self._history: list[tuple[int, float]] = []  # (limit, completions per second) per round trip
        self._recent_rate = 0.0  # completions per second, smoothed over recent round trips
        self._holding = False  # latency up and the rate flat: stop growing
        self._started = 0  # requests started so far (a clock for "once per round trip")
        self._decreased_at = -1  # the request count at the last decrease
        self.decreases = 0
        self.peak = initial

    @property
    def limit(self) -> int:
        """Requests allowed in flight now."""
        return max(self.minimum, min(self.maximum, int(self._limit)))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def on_rate_limit(self, retry_after: float | None = None) -> None:
        """Report a rate-limit reply (usable as ``OpenAIChatModel(on_rate_limit=...)``)."""
        self._decrease(self._started)

    def _decrease(self, started_at: int, factor: float | None = None) -> None:
        if started_at <= self._decreased_at:
            return  # this round trip already backed off
        self._decreased_at = self._started
        self._slow_start = False
        self._limit = max(float(self.minimum), self._limit * (self.backoff if factor is None else factor))
        self.decreases += 1

    def _observe(self, latency: float, started_at: int, binding: bool) -> None:
        if self._rate_limits is not None:
            seen = self._rate_limits()
            if seen > self._seen_rate_limits:
                self._seen_rate_limits = seen
                self._decrease(started_at)
                return
        now = time.perf_counter()
        if self._window_start is None:
            self._window_start = now
        self._baseline = latency if self._baseline is None else min(self._baseline, latency)
        self._smoothed = latency if self._smoothed is None else 0.9 * self._smoothed + 0.1 * latency
        self._samples += 1
        # judge a round trip's worth of completions at once (one slow reply is noise)
        if self._samples >= self.limit and now > self._window_start:
            rate = self._samples / (now - self._window_start)
            queueing = self._smoothed > self.latency_tolerance * self._baseline
            falling = rate < 0.5 * self._recent_rate  # halved: noise does not do that
            self._recent_rate = rate if not self._recent_rate else 0.5 * (self._recent_rate + rate)
            # did the last quarter of the limit buy anything? (compare with a window at <= 80% of it)
            earlier = next((r for lim, r in reversed(self._history) if lim <= 0.8 * self.limit), None)
            self._history.append((self.limit, rate))
            del self._history[:-64]
            self._holding = queueing and earlier is not None and rate < 1.05 * earlier
            self._samples, self._window_start = 0, now
            if queueing and falling:
                self._smoothed = self._baseline * (1 + self.latency_tolerance) / 2
                self._decrease(started_at, self.latency_backoff)
                return
        if binding and not self._holding:
            self._limit = min(
                float(self.maximum), self._limit + (1.0 if self._slow_start else 1.0 / self._limit)
            )
            self.peak = max(self.peak, self.limit)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """``async with limiter.slot(): ...`` runs the body when the limit allows, and times it.

        Callers wait in arrival order; a freed slot is handed to the first waiter. No lock is
        needed: the limiter lives on one event loop and never awaits while it updates its counts.
        """
        if self._in_flight >= self.limit or self._waiters:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter  # resolved by _wake, which takes the slot for us
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._in_flight -= 1  # handed a slot while being cancelled: give it back
                    self._wake()
                else:
                    self._waiters.remove(waiter)
                raise
        else:
            self._in_flight += 1
        self._started += 1
        started_at = self._started
        began = time.perf_counter()
        ok = False
        try:
            yield
            ok = True
        finally:
            binding = bool(self._waiters) or self._in_flight >= self.limit
            self._in_flight -= 1
            if ok:
                self._observe(time.perf_counter() - began, started_at, binding)
            elif self._rate_limits is not None and self._rate_limits() > self._seen_rate_limits:
                self._seen_rate_limits = self._rate_limits()
                self._decrease(started_at)
            self._wake()

    def _wake(self) -> None:
        while self._waiters and self._in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._in_flight += 1
                waiter.set_result(None)


class LimitedChatModel(WrappedChatModel):
    """``llm`` with its async calls behind ``limiter`` (sync calls and everything else pass through)."""

    def __init__(self, llm: ChatModel, limiter: AdaptiveLimiter) -> None:
        self.llm = llm
        self.limiter = limiter

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        return self.llm.complete(prompt, **complete_keywords(sampling))

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        async with self.limiter.slot():
            return await self.llm.acomplete(prompt, **complete_keywords(sampling))
