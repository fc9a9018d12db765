"""Reading a streamed chat completion (server-sent events) from an OpenAI-compatible server.

Helpers of :mod:`scopeguard.llm.openai_compat`: opening a stream is one retried attempt up to
its first event (:func:`first`, :func:`afirst`); :class:`StreamReader` hands out the text
pieces after it, bounded by the deadline, with every failure a typed
:class:`~scopeguard.errors.ScopeGuardError` (no retry: text was already handed out).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from scopeguard.errors import LLMResponseError, LLMTimeoutError, ScopeGuardError
from scopeguard.llm._openai_replies import delta_text
from scopeguard.llm.deadline import Budget

END = object()  # the end of a stream
_MIN_LEFT_S = 0.1  # a timeout with less of the deadline left is the deadline's


def first(events: Any) -> tuple[Any, Any]:
    """``(events, first event)``: reading the first event belongs to the (retried) attempt."""
    try:
        return events, next(events, END)
    except BaseException:
        events.close()
        raise


async def afirst(opening: Awaitable[Any]) -> tuple[Any, Any]:
    """Async twin of :func:`first`: ``opening`` is the SDK's ``create(..., stream=True)``."""
    events = await opening
    try:
        return events, await anext(events, END)
    except BaseException:
        await events.close()
        raise


@dataclass(frozen=True)
class StreamReader:
    """The text pieces of an opened stream; ``translate`` maps an SDK error to ours."""

    url: str
    secret: str | None
    budget: Budget | None
    translate: Callable[[Exception], ScopeGuardError]
    cause: Callable[[Exception], Exception | None]

    def pieces(self, events: Any, chunk: Any) -> Iterator[str]:
        try:
            self._check_opened(events, chunk)
            while chunk is not END:
                if piece := delta_text(chunk, self.url, self.secret):
                    yield piece
                chunk = self._next(events)
        finally:
            events.close()

    async def apieces(self, events: Any, chunk: Any) -> AsyncIterator[str]:
        try:
            self._check_opened(events, chunk)
            while chunk is not END:
                if piece := delta_text(chunk, self.url, self.secret):
                    yield piece
                chunk = await self._anext(events)
        finally:
            await events.close()

    def _check_opened(self, events: Any, chunk: Any) -> None:
        if chunk is END:  # a 200 that holds no server-sent event (a JSON body, an HTML page...)
            kind = getattr(getattr(events, "response", None), "headers", {}).get("content-type", "?")
            raise LLMResponseError(
                f"the LLM endpoint {self.url} answered a streaming request without any "
                f"server-sent event (content-type {kind})",
                reply=kind,
            )

    def _next(self, events: Any) -> Any:
        if self.budget is not None and self.budget.remaining() <= 0:
            raise self._timeout()
        try:
            return next(events, END)
        except Exception as exc:
            raise self._error(exc) from self.cause(exc)

    async def _anext(self, events: Any) -> Any:
        try:
            if self.budget is None:
                return await anext(events, END)
            return await asyncio.wait_for(anext(events, END), max(self.budget.remaining(), 0.0))
        except asyncio.TimeoutError:
            raise self._timeout() from None
        except Exception as exc:
            raise self._error(exc) from self.cause(exc)

    def _timeout(self) -> LLMTimeoutError:
        seconds = self.budget.seconds if self.budget is not None else 0.0
        return LLMTimeoutError(
            f"the LLM endpoint {self.url} was still streaming its reply at the deadline of {seconds:g}s",
            endpoint=self.url,
            deadline=seconds,
        )

    def _error(self, exc: Exception) -> ScopeGuardError:
        """A failure after the first event: the deadline's error when it ran out, else the SDK's
        error translated (a read timeout, a dropped connection, an event that is not JSON...)."""
        exc = _as_sdk_error(exc, self.url)
        spent = self.budget is not None and self.budget.remaining() < _MIN_LEFT_S
        if spent and isinstance(exc, openai.APITimeoutError):
            return self._timeout()
        return self.translate(exc)


def _as_sdk_error(exc: Exception, url: str) -> Exception:
    """The SDK's error for a transport failure that reached us raw while iterating a stream
    (openai 2.x lets httpx's read timeouts and dropped connections through; 3.x wraps them)."""
    if not isinstance(exc, httpx.TransportError):
        return exc
    request: Any
    try:
        request = exc.request
    except RuntimeError:  # an httpx error raised without its request
        request = httpx.Request("POST", url)
    if isinstance(exc, httpx.TimeoutException):
        return openai.APITimeoutError(request=request)
    return openai.APIConnectionError(message=str(exc) or type(exc).__name__, request=request)
