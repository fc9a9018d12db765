"""A time budget for every LLM call made inside a block, retries and waits included.

>>> from scopeguard.llm.deadline import deadline
>>> with deadline(20.0):
...     verdict = detector.detect(question, documents)  # every LLM call in here shares 20 s

The budget lives in a context variable, so it follows the code into ``asyncio`` tasks and
``asyncio.to_thread`` workers started inside the block. Nested blocks keep the tighter budget.
Backends read :func:`remaining` to cap each request's timeout and to stop retrying; when the
budget is spent they raise :class:`~scopeguard.errors.LLMTimeoutError`.
:class:`~scopeguard.Guard` (``deadline=``) and
:class:`~scopeguard.llm.openai_compat.OpenAIChatModel` (``deadline=``) open such a block for you.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from scopeguard.errors import ConfigurationError, LLMTimeoutError

__all__ = ["Budget", "check_deadline", "current", "deadline", "remaining", "validate_seconds"]


@dataclass(frozen=True)
class Budget:
    """A running deadline: ``seconds`` granted, expiring at ``expires_at`` (``time.monotonic``)."""

    seconds: float
    expires_at: float

    def remaining(self) -> float:
        return self.expires_at - time.monotonic()


_CURRENT: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("scopeguard_deadline", default=None)


def validate_seconds(seconds: float | None, what: str = "deadline") -> float | None:
    """``seconds`` as a float, or a :class:`ConfigurationError` unless it is positive and finite."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ConfigurationError(f"{what} must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"{what} must be a positive number of seconds, got {seconds!r}")
    return float(seconds)


def current() -> Budget | None:
    """The budget in force here (``None``: no deadline)."""
    return _CURRENT.get()


def remaining() -> float | None:
    """Seconds left of the budget in force (may be <= 0), or ``None`` when there is none."""
    budget = _CURRENT.get()
    return None if budget is None else budget.remaining()


@contextmanager
def deadline(seconds: float | None) -> Iterator[Budget | None]:
    """Bound every LLM call inside the block to ``seconds`` in total (``None``: no new bound).

    Inside a block that already has a deadline, the tighter of the two applies.
    """
    seconds = validate_seconds(seconds)
    outer = _CURRENT.get()
    if seconds is None:
        yield outer
        return
    budget = Budget(seconds, time.monotonic() + seconds)
    if outer is not None and outer.expires_at <= budget.expires_at:
        budget = outer
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def check_deadline(what: str = "the LLM call", *, endpoint: str | None = None) -> float | None:
    """Raise :class:`LLMTimeoutError` when the budget is spent; else the seconds left (or ``None``)."""
    budget = _CURRENT.get()
    if budget is None:
        return None
    left = budget.remaining()
    if left <= 0:
        raise LLMTimeoutError(
            f"{what} ran past its deadline of {budget.seconds:g}s", endpoint=endpoint, deadline=budget.seconds
        )
    return left
