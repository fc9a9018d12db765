"""Reading what an OpenAI-compatible server sent back, without trusting it.

Helpers of :mod:`scopeguard.llm.openai_compat`: secret redaction, ``Retry-After`` parsing, the
translation of the SDK's errors into scopeguard's, and the shape checks that turn a malformed
reply (an HTML page, ``{"object": "error"}``, no ``choices``, a choice without content, a
streamed event that is not a chunk) into :class:`~scopeguard.errors.LLMResponseError`.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from typing import Any

import openai

from scopeguard.errors import (
    ConfigurationError,
    DocumentTooLongError,
    LLMAuthError,
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
    ScopeGuardError,
)
from scopeguard.llm.base import Completion

_SK_RE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
_BEARER_RE = re.compile(r"\b(Bearer\s+)[^\s'\",;]+", re.IGNORECASE)
_SNIPPET = 300
_RETRY_STATUS = {408, 409, 429}
_CTX_RE = re.compile(r"(\d+)\D{0,40}?exceed\w*\D{0,40}?context\D{0,40}?(\d+)", re.IGNORECASE | re.DOTALL)


def is_connect_error(exc: BaseException) -> bool:
    """A refused connection or a DNS failure (not a timeout)."""
    return isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError)


def retryable(exc: BaseException) -> bool:
    """Worth another attempt: a transport failure (timeouts included), 408/409/429 or a 5xx."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    return False


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with each secret, anything like ``sk-...`` and ``Bearer TOKEN`` replaced by ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _SK_RE.sub("***", _BEARER_RE.sub(r"\1***", text))


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms`` or ``Retry-After``: seconds or HTTP date)."""
    response = getattr(exc, "response", None) if isinstance(exc, openai.APIStatusError) else None
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms):
            return max(0.0, ms / 1000.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(raw).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def snippet(reply: Any, *secrets: str | None) -> str:
    """The start of ``reply`` (an SDK object or a raw body) for an error message, secrets redacted."""
    if isinstance(reply, bytes):
        text = reply.decode("utf-8", "replace")
    elif isinstance(reply, str):
        text = reply
    else:
        try:
            text = reply.to_json(indent=None)
        except Exception:  # a construct()-ed object that does not serialise: fall back to repr
            text = repr(reply)
    text = " ".join(text.split())
    return redact(text[:_SNIPPET] + ("..." if len(text) > _SNIPPET else ""), *secrets)


def _error_detail(reply: Any) -> str:
    """The message of an error object sent with HTTP 200 (``{"object": "error", "message": ...}``)."""
    extra = getattr(reply, "model_extra", None) or {}
    error = extra.get("error") or getattr(reply, "error", None)
    if isinstance(error, dict):
        return str(error.get("message") or json.dumps(error))
    if isinstance(error, str):
        return error
    if getattr(reply, "object", None) == "error" or extra.get("object") == "error":
        return str(extra.get("message") or getattr(reply, "message", "") or "an error object")
    return ""


def validate(reply: Any, url: str, *secrets: str | None) -> Any:
    """``reply`` when it is a chat completion with a non-empty ``choices`` list of messages."""
    if isinstance(reply, str | bytes):  # the SDK returns the body as text when it is not JSON
        body = snippet(reply, *secrets)
        raise LLMResponseError(f"the LLM endpoint {url} sent a reply that is not JSON: {body!r}", reply=body)
    choices = getattr(reply, "choices", None)
    if not isinstance(choices, list) or not choices:
        body, detail = snippet(reply, *secrets), redact(_error_detail(reply), *secrets)
        what = f"an error instead of a completion: {detail}" if detail else "a reply without choices"
        raise LLMResponseError(f"the LLM endpoint {url} sent {what} ({body})", reply=body)
    for choice in choices:
        if getattr(choice, "message", None) is None:
            body = snippet(reply, *secrets)
            raise LLMResponseError(
                f"the LLM endpoint {url} sent a choice without a message ({body})", reply=body
            )
    return reply


def _content(message: Any, url: str, secrets: tuple[str | None, ...]) -> Any:
    """The ``content`` of a message or a streamed delta; a refusal it carries instead raises
    LLMResponseError quoting it."""
    content = getattr(message, "content", None)
    if not isinstance(content, str):
        refusal = getattr(message, "refusal", None)
        if isinstance(refusal, str) and refusal:
            said = redact(refusal[:_SNIPPET], *secrets)
            raise LLMResponseError(f"the model behind {url} refused to answer: {said!r}", reply=said)
    return content


def delta_text(chunk: Any, url: str, *secrets: str | None) -> str:
    """The text piece of one streamed chunk (``""`` for a role-only, final or usage-only chunk)."""
    choices = getattr(chunk, "choices", None)
    if not isinstance(choices, list):
        body = snippet(chunk, *secrets)
        raise LLMResponseError(
            f"the LLM endpoint {url} streamed an event that is not a chat completion chunk ({body})",
            reply=body,
        )
    delta = getattr(choices[0], "delta", None) if choices else None
    content = _content(delta, url, secrets)
    if isinstance(content, str):
        return content
    if content is not None:
        body = snippet(chunk, *secrets)
        raise LLMResponseError(f"the LLM endpoint {url} streamed non-text content ({body})", reply=body)
    return ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _position(choices: list[Any]) -> Any:
    """Sort key: a choice's ``index`` when the server sent one, else its place in the list."""
    places = {id(c): i for i, c in enumerate(choices)}

    def key(choice: Any) -> int:
        index = getattr(choice, "index", None)
        return index if isinstance(index, int) and not isinstance(index, bool) else places[id(choice)]

    return key


def _text(choice: Any, url: str, secrets: tuple[str | None, ...]) -> str:
    message = choice.message
    content = _content(message, url, secrets)
    if isinstance(content, str):
        return content
    reason = getattr(choice, "finish_reason", None)
    raise LLMResponseError(
        f"the LLM endpoint {url} sent a choice without text content (finish_reason {reason!r})",
        reply=snippet(message, *secrets),
    )


def merge(responses: list[Any], n: int, model: str, url: str, *secrets: str | None) -> Completion:
    """One :class:`Completion` with the first ``n`` texts of validated ``responses``."""
    texts: list[str] = []
    reasons: list[str] = []
    prompt_tokens = completion_tokens = 0
    for resp in responses:
        for choice in sorted(resp.choices, key=_position(resp.choices)):
            texts.append(_text(choice, url, secrets))
            reason = getattr(choice, "finish_reason", None)
            reasons.append(reason if isinstance(reason, str) else "")
        usage = getattr(resp, "usage", None)
        prompt_tokens += _count(getattr(usage, "prompt_tokens", 0))
        completion_tokens += _count(getattr(usage, "completion_tokens", 0))
    served = getattr(responses[0], "model", None) if responses else None
    return Completion(
        texts=tuple(texts[:n]),
        model=served if isinstance(served, str) and served else model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        requests=len(responses),
        finish_reasons=tuple(reasons[:n]),
    )


def translate(
    exc: Exception, *, url: str, model: str, timeout: float, attempts: int, said: str
) -> ScopeGuardError:
    """The ScopeGuardError for a failed SDK call (``said``: its message, secrets redacted)."""
    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeoutError(
            f"the LLM endpoint {url} timed out (timeout {timeout:g}s, {attempts} attempts)",
            endpoint=url,
        )
    if isinstance(exc, openai.APIConnectionError):
        return LLMConnectionError(
            f"cannot reach the LLM endpoint {url} ({said}; {attempts} attempts). "
            "Is the server running and the base URL right?",
            endpoint=url,
        )
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return LLMAuthError(f"the LLM endpoint {url} refused the credentials: set OPENAI_API_KEY ({said})")
    if isinstance(exc, openai.NotFoundError):
        return LLMError(f"the LLM endpoint {url} does not know the model {model!r} ({said})")
    if isinstance(exc, openai.APIStatusError):
        match = _CTX_RE.search(str(exc)) if exc.status_code == 400 else None
        if match:
            n_tokens, limit = int(match.group(1)), int(match.group(2))
            return DocumentTooLongError(
                f"the prompt ({n_tokens} tokens) does not fit the context window of {model!r} "
                f"({limit} tokens): shorten or split the documents",
                n_tokens=n_tokens,
                limit=limit,
            )
        if exc.status_code == 429:
            return LLMRateLimitError(
                f"the LLM endpoint {url} still answered HTTP 429 (too many requests) after {attempts} "
                f"attempts: {said}"
            )
        return LLMError(f"the LLM endpoint {url} answered HTTP {exc.status_code}: {said}")
    if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
        return ConfigurationError(f"invalid chat completion parameters for {url}: {exc}")
    # a 200 whose body the SDK could not read: not JSON, a streaming error, a pydantic failure...
    kind = type(exc).__name__
    return LLMResponseError(
        f"the LLM endpoint {url} sent a reply that is not a valid chat completion ({kind}: {said})",
        reply=said,
    )
