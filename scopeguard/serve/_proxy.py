"""``POST /v1/chat/completions``: an OpenAI-compatible chat endpoint guarded by the detector.

The request is a normal chat request plus ``documents`` (the retrieved documents: strings or
``{text, id, metadata}``; from the official client, ``extra_body={"documents": [...]}``). The last
user message is checked against them. In scope (or with the ``flag`` policy) the request, less
``documents``, goes to the upstream LLM and its reply comes back as it was sent; out of scope the
policy's response comes back as a chat completion. ``stream: true`` streams either as server-sent
events. The verdict rides along: a ``scopeguard`` field in the completion (in the first chunk when
streaming) and the ``X-Scopeguard-Verdict`` / ``X-Scopeguard-Action`` headers. A verdict in a
calibration profile's hedge band (``verdict.hedge``) is forwarded like any in-scope question: the
upstream's reply is not rewritten, and ``X-Scopeguard-Hedge: true`` tells the client to add its caveat.

Failures fail closed: no verdict in time is a 504, an upstream LLM that is down or sends garbage
is a 502 (an error in the stream once it has started); the body says which, with the verdict.
The deadline covers the check and the upstream reply (its first chunk when streaming); a stream
after that is bounded by ``stream_idle_timeout`` (between chunks) and ``stream_deadline`` (in all,
from the request's arrival): either ends it with an error event (``stream_idle_timeout`` or
``stream_deadline_exceeded``, kind ``timeout``), counted in ``scopeguard_streams_cut_total``.

With ``speculative`` the upstream request starts beside the check and its reply (a stream's
chunks) is held until the verdict: forwarded as above when the verdict forwards, cancelled
otherwise (out of scope, no verdict in time: nothing of it is sent). What a dropped answer cost is
counted in ``scopeguard_speculative_discarded_tokens_total`` / ``..._seconds_total`` and traced
(a ``scopeguard.speculative`` span).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from scopeguard._speculation import AsyncHeldAnswer, Tally
from scopeguard.errors import (
    ErrorKind,
    InputError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    ScopeGuardError,
    error_kind,
)
from scopeguard.llm.deadline import deadline as deadline_block
from scopeguard.llm.deadline import remaining
from scopeguard.policies import FlagOnlyPolicy, PolicyContext
from scopeguard.serve._limits import checked_documents
from scopeguard.serve._middleware import error_body
from scopeguard.serve._runtime import Runtime
from scopeguard.serve._schemas import Documents
from scopeguard.serve._telemetry import span
from scopeguard.types import Action, Verdict


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class GuardedChatRequest(BaseModel):
    """An OpenAI chat completions request (every other field passes through) plus ``documents``."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessageIn] = Field(..., min_length=1)
    stream: bool = False
    documents: Documents = Field(
        ..., description="The retrieved documents the last user message is checked against."
    )


def last_user_text(messages: list[ChatMessageIn]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            content = message.content
            if isinstance(content, list):  # content parts: the text ones
                content = " ".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
            if content and content.strip():
                return content.strip()
    raise InputError("the request has no user message with text to check")


def guard_field(verdict: Verdict, action: Action, failed_closed: bool) -> dict[str, Any]:
    return {
        "verdict": verdict.model_dump(mode="json"),
        "action": action.value,
        "failed_closed": failed_closed,
    }


def guard_headers(verdict: Verdict, action: Action) -> dict[str, str]:
    headers = {"X-Scopeguard-Verdict": verdict.label, "X-Scopeguard-Action": action.value}
    if verdict.hedge:  # in scope, in the calibration profile's hedge band: the client may add a caveat
        headers["X-Scopeguard-Hedge"] = "true"
    return headers


def _chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _sse(data: dict[str, Any] | str) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def _count_usage(tally: Tally, event: Any) -> None:
    """Add the completion tokens an upstream reply or stream event reports (``usage``) to ``tally``."""
    usage = event.get("usage") if isinstance(event, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and tokens > 0:
        tally.add_tokens(tokens)


async def _close(events: Any) -> None:
    """Close an upstream stream (the SDK's ``close``) or a held one (an async generator's ``aclose``)."""
    close = getattr(events, "aclose", None) or events.close
    await close()


def add_proxy_routes(app: Any, runtime: Runtime) -> None:
    from fastapi.responses import JSONResponse, Response, StreamingResponse

    config, guard, metrics = runtime.config, runtime.guard, runtime.metrics

    def failed(status: int, message: str, error_type: str, verdict: Verdict, kind: ErrorKind) -> Any:
        metrics.fail_closed.labels("deadline" if status == 504 else "upstream").inc()
        body = json.loads(error_body(message, error_type, kind=kind))
        body["scopeguard"] = guard_field(verdict, Action.REFUSED, True)
        return JSONResponse(body, status, headers=guard_headers(verdict, Action.REFUSED))

    def upstream_body(req: GuardedChatRequest) -> dict[str, Any]:
        body = req.model_dump(exclude={"documents"}, exclude_unset=True)
        body["messages"] = [m.model_dump(exclude_unset=True) for m in req.messages]
        body["stream"] = req.stream
        if config.upstream_model:
            body["model"] = config.upstream_model
        return body

    async def open_stream(body: dict[str, Any]) -> tuple[Any, Any]:
        """The upstream stream and its first chunk, through the upstream model's retries."""
        return await runtime.upstream.aopen_stream(body)

    async def relay(events: Any, first: Any, extra: dict[str, Any], arrived: float) -> AsyncIterator[bytes]:
        """The upstream's events as they come, within the stream's limits: an idle gap longer than
        ``stream_idle_timeout`` or a stream past ``stream_deadline`` (from the request's arrival)
        ends it with an error event naming the limit, as an upstream failure mid-stream does."""
        cut: tuple[str, str, str] | None = None  # reason, error type, message
        try:
            if first is not None:
                yield _sse({**first, "scopeguard": extra} if isinstance(first, dict) else first)
            upstream = events.__aiter__()
            while True:
                left = config.stream_deadline - (time.monotonic() - arrived)
                wait = min(config.stream_idle_timeout, left)
                try:
                    chunk = await asyncio.wait_for(upstream.__anext__(), max(wait, 0.0))
                except StopAsyncIteration:
                    break
                except asyncio.TimeoutError:
                    if wait < config.stream_idle_timeout:
                        limit = f"the stream ran past its deadline of {config.stream_deadline:g}s"
                        cut = ("deadline", "stream_deadline_exceeded", limit)
                    else:
                        idle = f"the upstream LLM sent nothing for {config.stream_idle_timeout:g}s"
                        cut = ("idle", "stream_idle_timeout", idle)
                    break
                if not isinstance(chunk, dict):
                    raise LLMResponseError("the upstream LLM streamed an event that is not a JSON object")
                yield _sse(chunk)
            if cut is None:
                yield _sse("[DONE]")
            else:
                metrics.streams_cut.labels(cut[0]).inc()
                yield _sse(json.loads(error_body(cut[2], cut[1], kind="timeout")))
        except Exception as exc:  # the status is sent already: the error goes in the stream
            metrics.fail_closed.labels("upstream").inc()
            metrics.streams_cut.labels("upstream").inc()
            message = f"the upstream LLM failed mid-stream: {type(exc).__name__}"
            # what the upstream's own iterator raises: a broken event (bad_reply) or a broken connection
            kind = error_kind(exc) if isinstance(exc, ScopeGuardError) else None
            kind = kind or ("bad_reply" if isinstance(exc, ValueError) else "upstream")
            yield _sse(json.loads(error_body(message, "upstream_error", kind=kind)))
        finally:
            await _close(events)

    def speculate(req: GuardedChatRequest) -> AsyncHeldAnswer[Any]:
        """The upstream request started now, its reply (or a stream's events) held until the verdict;
        the completion tokens it reports are counted."""
        body = upstream_body(req)

        async def produce(tally: Tally) -> AsyncIterator[Any]:
            if not req.stream:
                reply = await runtime.upstream.achat_completion(body)
                _count_usage(tally, reply.model_dump(mode="json"))
                yield reply
                return
            events, first = await open_stream(body)
            try:
                if first is not None:
                    _count_usage(tally, first)
                    yield first
                async for event in events:
                    _count_usage(tally, event)
                    yield event
            finally:
                await events.close()

        return AsyncHeldAnswer(produce, name="scopeguard-speculative-upstream")

    def policy_reply(
        req: GuardedChatRequest, text: str, extra: dict[str, Any], headers: dict[str, str]
    ) -> Any:
        cid = f"chatcmpl-scopeguard-{uuid.uuid4().hex[:12]}"
        if req.stream:
            chunks = [
                {**_chunk(cid, req.model, {"role": "assistant", "content": ""}, None), "scopeguard": extra},
                _chunk(cid, req.model, {"content": text}, None),
                _chunk(cid, req.model, {}, "stop"),
            ]
            payload = b"".join(_sse(c) for c in chunks) + _sse("[DONE]")
            return Response(payload, media_type="text/event-stream", headers=headers)
        body = {
            "id": cid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "scopeguard": extra,
        }
        return JSONResponse(body, headers=headers)

    @app.post("/v1/chat/completions", summary="OpenAI-compatible chat, guarded")
    async def chat_completions(req: GuardedChatRequest) -> Any:
        """A chat completion request plus ``documents``; see the module docstring of
        ``scopeguard.serve._proxy`` (docs/guides/serve.md) for what comes back."""
        arrived = time.monotonic()
        question, docs = last_user_text(req.messages), checked_documents(config, req.documents)
        with runtime.admit(docs), deadline_block(config.deadline):
            held = speculate(req) if config.speculative and runtime.upstream is not None else None
            try:
                return await guarded(req, question, docs, arrived, held)
            finally:  # an answer the verdict did not forward is dropped here
                if held is not None:
                    runtime.speculated("proxy", None if held.released else held.discard())

    async def guarded(
        req: GuardedChatRequest,
        question: str,
        docs: Any,
        arrived: float,
        held: AsyncHeldAnswer[Any] | None,
    ) -> Any:
        """The verdict on ``question``, then the policy's reply or the upstream's (``held``: the
        upstream's speculative reply, used when the verdict forwards)."""
        done = await runtime.check(question, docs)
        verdict: Verdict = done.value
        if done.timed_out:
            return failed(
                504,
                f"no verdict within the deadline of {config.deadline:g}s",
                "deadline_exceeded",
                verdict,
                "timeout",
            )
        oos, closed = guard.decide(verdict)
        forward = not oos or isinstance(guard.policy, FlagOnlyPolicy)
        if not forward:
            with span("scopeguard.policy", policy=guard.policy.name):
                outcome = await guard.policy.aapply(PolicyContext(question, docs, verdict, guard.llm))
            extra = guard_field(verdict, outcome.action, closed)
            return policy_reply(req, outcome.response, extra, guard_headers(verdict, outcome.action))
        if config.upstream is None:
            return failed(502, "no upstream LLM is configured (--upstream)", "no_upstream", verdict, "config")
        action = Action.FLAGGED if oos else Action.ANSWERED
        extra, headers = guard_field(verdict, action, closed), guard_headers(verdict, action)
        return await forward_upstream(req, verdict, extra, headers, arrived, held)

    async def forward_upstream(
        req: GuardedChatRequest,
        verdict: Verdict,
        extra: dict[str, Any],
        headers: dict[str, str],
        arrived: float,
        held: AsyncHeldAnswer[Any] | None = None,
    ) -> Any:
        body = upstream_body(req)
        started = time.perf_counter()
        try:
            with span("scopeguard.upstream", stream=req.stream, speculative=held is not None):
                if req.stream:
                    left = max(remaining() or config.deadline, 0.0)
                    if held is not None:
                        events = held.release()
                        first = await asyncio.wait_for(anext(events, None), left)
                    else:
                        events, first = await asyncio.wait_for(open_stream(body), left)
                elif held is not None:
                    reply = await held.result()
                else:
                    reply = await runtime.upstream.achat_completion(body)
        except (asyncio.TimeoutError, LLMTimeoutError):
            return failed(504, f"the upstream LLM did not answer within the deadline of {config.deadline:g}s",
                          "deadline_exceeded", verdict, "timeout")  # fmt: skip
        except LLMError as exc:
            return failed(502, f"the upstream LLM failed: {exc}", "upstream_error", verdict, exc.kind)
        finally:
            metrics.upstream_seconds.observe(time.perf_counter() - started)
        if req.stream:
            return StreamingResponse(
                relay(events, first, extra, arrived), media_type="text/event-stream", headers=headers
            )
        return JSONResponse(
            {**reply.model_dump(mode="json", exclude_unset=True), "scopeguard": extra}, headers=headers
        )
