"""The ASGI layer in front of every route: request id, API key, body size, access log, metrics."""

from __future__ import annotations

import hmac
import logging
import re
import time
import uuid
from typing import Any

from scopeguard.serve._runtime import Runtime
from scopeguard.serve._telemetry import REQUEST_ID, set_attributes, span

logger = logging.getLogger("scopeguard.serve.access")

OPEN_PATHS = ("/healthz", "/readyz")  # liveness and readiness need no key
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
Scope = dict[str, Any]


#: the routes that run checks, admitted by deadline (see :mod:`scopeguard.serve._admission`)
ADMITTED_PATHS = frozenset(
    {"/v1/check", "/v1/check/batch", "/v1/answer", "/v1/preread", "/v1/chat/completions"}
)


class BodyTooLargeError(Exception):
    """The body grew past ``max_body_bytes`` while being read."""


def error_body(message: str, error_type: str, **extra: Any) -> bytes:
    import json

    return json.dumps(
        {"error": {"message": message, "type": error_type, "request_id": REQUEST_ID.get(), **extra}}
    ).encode()


class GuardrailsMiddleware:
    """Pure ASGI (streaming responses pass through untouched)."""

    def __init__(self, app: Any, runtime: Runtime, routes: set[str]) -> None:
        self.app = app
        self.runtime = runtime
        self.routes = routes
        key = runtime.config.api_key
        self._key = key.get_secret_value().encode() if key is not None else None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = headers.get("x-request-id", "")
        request_id = given if _SAFE_ID.match(given) else uuid.uuid4().hex[:16]
        token = REQUEST_ID.set(request_id)
        path = scope["path"]
        route = path if path in self.routes else "other"
        started = time.perf_counter()
        status = {"code": 500}
        self.runtime.active += 1  # in the app now: no longer the HTTP stack's unread backlog

        async def send_wrapped(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                message.setdefault("headers", [])
                # the server's own time to the reply's start (W3C Server-Timing): what a client
                # measures beyond it was spent before the request reached the server, or after
                took = f"app;dur={(time.perf_counter() - started) * 1000:.1f}".encode()
                message["headers"] = [
                    *message["headers"],
                    (b"x-request-id", request_id.encode()),
                    (b"server-timing", took),
                ]
            await send(message)

        try:
            with span("scopeguard.request", route=route, method=scope["method"]) as s:
                await self._guarded(scope, receive, send_wrapped, headers, path)
                set_attributes(s, status=status["code"])
        finally:
            self.runtime.active -= 1
            elapsed = time.perf_counter() - started
            self.runtime.metrics.requests.labels(route, str(status["code"])).inc()
            self.runtime.metrics.request_seconds.labels(route).observe(elapsed)
            logger.info(
                "%s %s %d",
                scope["method"],
                path,
                status["code"],
                extra={"status": status["code"], "duration_ms": round(elapsed * 1000, 1), "route": route},
            )
            REQUEST_ID.reset(token)

    async def _guarded(
        self, scope: Scope, receive: Any, send: Any, headers: dict[str, str], path: str
    ) -> None:
        if self._key is not None and path not in OPEN_PATHS and not self._authorised(headers):
            self.runtime.metrics.rejected.labels("unauthorised").inc()
            await _respond(send, 401, error_body("missing or wrong API key", "unauthorised"),
                           [(b"www-authenticate", b"Bearer")])  # fmt: skip
            return
        if scope["method"] == "POST" and path in ADMITTED_PATHS:
            refused = self.runtime.admission.precheck()
            if refused is not None:  # before the body is read or parsed: a burst costs its headers
                self.runtime.metrics.rejected.labels(refused.reason).inc()
                body = error_body(f"{refused}; retry after {refused.retry_after}s", refused.error_type)
                await _respond(send, 429, body, [(b"retry-after", str(refused.retry_after).encode())])
                return
        limit = self.runtime.config.max_body_bytes
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await self._too_large(send, limit)
            return
        seen = {"bytes": 0, "over": False}

        async def receive_limited() -> dict[str, Any]:
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                seen["bytes"] += len(message.get("body", b""))
                if seen["bytes"] > limit:
                    seen["over"] = True
                    raise BodyTooLargeError
            return message

        async def send_checked(message: dict[str, Any]) -> None:
            # the framework answers a body that broke off as it sees fit (FastAPI: 400): a 413 instead
            if seen["over"]:
                if message["type"] == "http.response.start":
                    await self._too_large(send, limit)
                return
            await send(message)

        try:
            await self.app(scope, receive_limited, send_checked)
        except BodyTooLargeError:
            await self._too_large(send, limit)

    def _authorised(self, headers: dict[str, str]) -> bool:
        if self._key is None:
            return True
        scheme, _, given = headers.get("authorization", "").partition(" ")
        # constant time, whatever the given key's length
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._key)

    async def _too_large(self, send: Any, limit: int) -> None:
        self.runtime.metrics.rejected.labels("too_large").inc()
        body = error_body(f"request body larger than max_body_bytes={limit}", "request_too_large",
                          limit="max_body_bytes")  # fmt: skip
        await _respond(send, 413, body)


async def _respond(
    send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
