"""The retries, deadlines and error translation of one OpenAI-compatible endpoint.

:class:`RetryingEndpoint` is the half of :class:`~scopeguard.llm.openai_compat.OpenAIChatModel`
that turns one logical request into attempts: tenacity retries with the server's Retry-After or
exponential backoff with jitter, a shorter leash on refused connections, each attempt's timeout
capped by the deadline in force (:mod:`scopeguard.llm.deadline`), a hard stop at the deadline for
async calls, and every failure translated into a typed :class:`~scopeguard.errors.ScopeGuardError`
with the key redacted. The state of one request's retries lives in a :class:`RetryCall`, never on
the client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception

from scopeguard.errors import LLMError, LLMTimeoutError, ScopeGuardError
from scopeguard.llm._openai_replies import is_connect_error, redact, retry_after, retryable, translate
from scopeguard.llm.deadline import current as current_budget

__all__ = ["MAX_RETRY_AFTER_S", "RetryCall", "RetryingEndpoint"]

logger = logging.getLogger("scopeguard.llm.openai_compat")
T = TypeVar("T")
_MIN_REQUEST_S = 0.1  # with less of the deadline left, another attempt is pointless
MAX_RETRY_AFTER_S = 60.0  # without a deadline, a longer Retry-After fails at once
_GRACE_S = 0.5  # the async hard stop comes this long after the deadline, behind the request timeout


@dataclass
class RetryCall:
    """The state of one logical request's retries (nothing of it sticks to the client)."""

    attempts: int = 0
    gave_up: str = ""  # "deadline" or "retry-after" when the retries stopped before the attempt cap
    waits: dict[int, float] = field(default_factory=dict)  # attempt number -> planned wait
    asked: float | None = None  # the last Retry-After the server sent


class RetryingEndpoint:
    """Retries, deadlines and typed errors for the requests of one endpoint (a mixin: the model
    sets the attributes below)."""

    base_url: str
    model: str
    timeout: float
    max_attempts: int
    connect_attempts: int
    rate_limits: int
    on_rate_limit: Callable[[float | None], None] | None
    _backoff: Callable[[RetryCallState], float]

    @property
    def _secret(self) -> str | None:
        raise NotImplementedError

    def _redact(self, text: str) -> str:
        return redact(text, self._secret)

    def _wait(self, call: RetryCall, state: RetryCallState) -> float:
        """The wait before the next attempt (the server's Retry-After, else backoff), planned once."""
        if state.attempt_number not in call.waits:
            exc = state.outcome.exception() if state.outcome else None
            call.asked = retry_after(exc) if exc is not None else None
            call.waits[state.attempt_number] = call.asked if call.asked is not None else self._backoff(state)
            if getattr(exc, "status_code", None) == 429:
                self.rate_limits += 1
                if self.on_rate_limit is not None:
                    self.on_rate_limit(call.asked)
        return call.waits[state.attempt_number]

    def _stop(self, call: RetryCall, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        limit = self.connect_attempts if exc is not None and is_connect_error(exc) else self.max_attempts
        if state.attempt_number >= limit:
            return True
        wait, budget = self._wait(call, state), current_budget()
        if budget is not None and budget.remaining() - wait < _MIN_REQUEST_S:
            call.gave_up = "deadline"
        elif budget is None and call.asked is not None and call.asked > MAX_RETRY_AFTER_S:
            call.gave_up = "retry-after"
        return bool(call.gave_up)

    def _retry_kwargs(self, call: RetryCall) -> dict[str, Any]:
        return {
            "stop": lambda s: self._stop(call, s),
            "wait": lambda s: self._wait(call, s),
            "retry": retry_if_exception(retryable),
            "reraise": True,
            "before_sleep": lambda s: logger.info(
                "retrying %s in %.2fs after %s (attempt %d)",
                self.base_url,
                self._wait(call, s),
                self._redact(str(s.outcome.exception() if s.outcome else "?")),
                s.attempt_number,
            ),
        }

    def _attempt_timeout(self, call: RetryCall, timeout: float) -> float:
        """This attempt's request timeout: ``timeout`` capped by the deadline (spent: raise)."""
        budget = current_budget()
        left = None if budget is None else budget.remaining()
        if budget is not None and left is not None and left < _MIN_REQUEST_S:
            raise self._deadline_error(budget.seconds, call, None)
        call.attempts += 1
        return timeout if left is None else min(timeout, left)

    def _deadline_error(self, seconds: float, call: RetryCall, exc: BaseException | None) -> LLMTimeoutError:
        last = f"; last error: {self._redact(str(exc))}" if exc is not None else ""
        url, tried = self.base_url, f"{call.attempts} attempts{last}"
        if call.asked is not None and call.gave_up == "deadline":
            message = (
                f"the LLM endpoint {url} asked to retry after {call.asked:g}s, which does not fit "
                f"the deadline of {seconds:g}s ({tried})"
            )
        else:
            message = f"the LLM endpoint {url} did not answer within the deadline of {seconds:g}s ({tried})"
        return LLMTimeoutError(message, endpoint=url, deadline=seconds)

    def _translate(self, exc: Exception, call: RetryCall) -> ScopeGuardError:
        url, said = self.base_url, self._redact(str(exc))
        budget = current_budget()
        if call.gave_up == "deadline" and budget is not None:
            return self._deadline_error(budget.seconds, call, exc)
        if call.gave_up == "retry-after":
            return LLMError(
                f"the LLM endpoint {url} asked to retry after {call.asked:g}s, more than the "
                f"{MAX_RETRY_AFTER_S:g}s scopeguard waits without a deadline ({said})"
            )
        return translate(
            exc, url=url, model=self.model, timeout=self.timeout, attempts=call.attempts, said=said
        )

    def _cause(self, exc: Exception) -> Exception | None:
        """The SDK's error, to chain to ours, unless its message holds a secret."""
        return exc if self._redact(str(exc)) == str(exc) else None

    def _send(self, send: Callable[[float], T], timeout: float) -> T:
        """``send(attempt_timeout)`` through the retries and the error translation (sync)."""
        call = RetryCall()
        try:
            for attempt in Retrying(**self._retry_kwargs(call)):
                with attempt:
                    return send(self._attempt_timeout(call, timeout))
        except ScopeGuardError:
            raise
        except Exception as exc:
            raise self._translate(exc, call) from self._cause(exc)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _asend(self, send: Callable[[float], Awaitable[T]], timeout: float) -> T:
        """Async twin of :meth:`_send`, with a hard stop at the deadline (a server may trickle
        bytes past the request timeout)."""
        call, budget = RetryCall(), current_budget()

        async def attempts() -> T:
            async for attempt in AsyncRetrying(**self._retry_kwargs(call)):
                with attempt:
                    return await send(self._attempt_timeout(call, timeout))
            raise AssertionError("unreachable")  # pragma: no cover

        try:
            if budget is None:
                return await attempts()
            return await asyncio.wait_for(attempts(), max(budget.remaining(), 0) + _GRACE_S)
        except ScopeGuardError:
            raise
        except asyncio.TimeoutError:
            raise self._deadline_error(budget.seconds if budget else 0.0, call, None) from None
        except Exception as exc:
            raise self._translate(exc, call) from self._cause(exc)
