"""Request ids, structured JSON logs and OpenTelemetry spans (with ``opentelemetry-api`` only)."""

from __future__ import annotations

import contextvars
import importlib
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("scopeguard_request_id", default="-")

_tracer: Any = None
_tracer_looked_up = False


def _get_tracer() -> Any:
    """The OpenTelemetry tracer, or ``None`` without ``opentelemetry-api`` (spans are then free).

    Only the API is used: spans go wherever the application's SDK (if any) sends them."""
    global _tracer, _tracer_looked_up
    if not _tracer_looked_up:
        _tracer_looked_up = True
        try:
            trace = importlib.import_module("opentelemetry.trace")
        except ImportError:
            _tracer = None
        else:
            _tracer = trace.get_tracer("scopeguard.serve")
    return _tracer


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """An OpenTelemetry span (a no-op without the API); ``None`` attributes are left out."""
    tracer = _get_tracer()
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name) as current:
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(f"scopeguard.{key}", value)
        yield current


def set_attributes(current: Any, **attributes: Any) -> None:
    if current is not None:
        for key, value in attributes.items():
            if value is not None:
                current.set_attribute(f"scopeguard.{key}", value)


def trace_discarded(cost: Any) -> None:
    """A ``scopeguard.speculative`` span recording what a speculative answer dropped by its verdict
    cost (a :class:`~scopeguard._speculation.DiscardedCost`): seconds, tokens and how counted."""
    with span(
        "scopeguard.speculative",
        outcome="discarded",
        discarded_seconds=round(cost.seconds, 4),
        discarded_tokens=cost.tokens,
        counted=cost.counted,
        finished=cost.finished,
    ):
        pass


_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the request id and any ``extra``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": REQUEST_ID.get(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _RESERVED and not k.startswith("_")})
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_json_logs(level: int = logging.INFO) -> None:
    """Send every log line to stderr as JSON (the ``serve`` command's logging)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
