"""OpenAI-compatible chat backend (OpenAI, Azure, vLLM, Ollama, llama.cpp server, Together...).

``from_spec("openai:gpt-4o-mini")`` reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``; any server
speaking the OpenAI chat API works by setting the base URL (a base URL needs no key).

* Retries with exponential backoff and jitter (tenacity) on 408/409/429/5xx and timeouts; a
  refused connection is retried only ``connect_attempts`` times (default 2) so a server that is
  down is reported fast. After the last attempt an unreachable endpoint raises
  :class:`~scopeguard.errors.LLMConnectionError` naming the URL.
* ``n`` samples go in one request; when the server ignores ``n`` (returns fewer choices) the
  missing samples are requested one at a time. ``n`` is a per-call argument: nothing sticks
  to the client between calls.
* ``complete`` uses the sync SDK client, ``acomplete`` the async one (one per event loop).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    wait_exponential_jitter,
)

from scopeguard.errors import ConfigurationError, DocumentTooLongError, LLMConnectionError, LLMError
from scopeguard.llm.base import BaseChatModel, Completion, Prompt, to_messages

__all__ = ["OpenAIChatModel", "from_spec_arg"]

logger = logging.getLogger(__name__)
_NO_KEY = "sk-no-key-required"
_RETRY_STATUS = {408, 409, 429}
_CTX_RE = re.compile(r"(\d+)\D{0,40}?exceed\w*\D{0,40}?context\D{0,40}?(\d+)", re.IGNORECASE | re.DOTALL)


def _is_connect_error(exc: BaseException) -> bool:
    return isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    return False


class OpenAIChatModel(BaseChatModel):
    """A chat model behind an OpenAI-compatible HTTP API.

    Args:
        model: the model name the server expects.
        base_url: the API root (``http://127.0.0.1:8080/v1``); ``None`` = api.openai.com.
        api_key: the key; may be omitted when ``base_url`` is given.
        timeout: seconds per request.
        max_attempts: attempts for rate limits, 5xx and timeouts.
        connect_attempts: attempts when the connection is refused / DNS fails.
        backoff: the first retry wait in seconds (doubles, with jitter, up to ``max_backoff``).
        max_tokens: the reply cap used when a call passes ``max_tokens=None`` (``None``: the
            server's default).
        extra_body: extra JSON fields sent with every request (server-specific options).
        client, async_client: prebuilt SDK clients (for example ``openai.AzureOpenAI``); when
            given, ``base_url``/``api_key``/``timeout`` are ignored. Set their ``max_retries=0``.
    """

    supports_n = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_attempts: int = 4,
        connect_attempts: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
        client: Any = None,
        async_client: Any = None,
    ) -> None:
        if not model:
            raise ConfigurationError("the OpenAI-compatible backend needs a model name")
        if max_attempts < 1 or connect_attempts < 1:
            raise ConfigurationError("max_attempts and connect_attempts must be >= 1")
        self.model = model
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.connect_attempts = connect_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self._client_kwargs: dict[str, Any] = {
            "api_key": api_key or _NO_KEY,
            "base_url": base_url,
            "timeout": timeout,
            "max_retries": 0,  # retries are ours (tenacity), with a short leash on refused connections
        }
        self._client = client if client is not None else openai.OpenAI(**self._client_kwargs)
        self._async_client = async_client
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self.base_url = str(self._client.base_url).rstrip("/")

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    # -- retry plumbing -------------------------------------------------------------------
    def _stop(self, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        limit = self.connect_attempts if exc is not None and _is_connect_error(exc) else self.max_attempts
        return state.attempt_number >= limit

    def _retry_kwargs(self) -> dict[str, Any]:
        return {
            "stop": self._stop,
            "wait": wait_exponential_jitter(initial=self.backoff, max=self.max_backoff),
            "retry": retry_if_exception(_retryable),
            "reraise": True,
            "before_sleep": lambda s: logger.info(
                "retrying %s after %s (attempt %d)",
                self.base_url,
                s.outcome.exception() if s.outcome else "?",
                s.attempt_number,
            ),
        }

    def _translate(self, exc: Exception) -> Exception:
        url = self.base_url
        if isinstance(exc, openai.APITimeoutError):
            return LLMConnectionError(
                f"the LLM endpoint {url} timed out (timeout {self.timeout}s, {self.max_attempts} attempts)",
                endpoint=url,
            )
        if isinstance(exc, openai.APIConnectionError):
            return LLMConnectionError(
                f"cannot reach the LLM endpoint {url} ({exc}; {self.connect_attempts} attempts). "
                "Is the server running and the base URL right?",
                endpoint=url,
            )
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return LLMError(f"the LLM endpoint {url} refused the credentials: set OPENAI_API_KEY ({exc})")
        if isinstance(exc, openai.NotFoundError):
            return LLMError(f"the LLM endpoint {url} does not know the model {self.model!r} ({exc})")
        if isinstance(exc, openai.APIStatusError):
            match = _CTX_RE.search(str(exc)) if exc.status_code == 400 else None
            if match:
                n_tokens, limit = int(match.group(1)), int(match.group(2))
                return DocumentTooLongError(
                    f"the prompt ({n_tokens} tokens) does not fit the context window of {self.model!r} "
                    f"({limit} tokens): shorten or split the documents",
                    n_tokens=n_tokens,
                    limit=limit,
                )
            return LLMError(f"the LLM endpoint {url} answered HTTP {exc.status_code}: {exc}")
        return exc

    # -- requests -------------------------------------------------------------------------
    def _params(
        self, prompt: Prompt, n: int, temperature: float, max_tokens: int | None, seed: int | None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in to_messages(prompt)],
            "temperature": temperature,
        }
        if n != 1:
            params["n"] = n
        if max_tokens is None:
            max_tokens = self.max_tokens
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if seed is not None:
            params["seed"] = seed
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    @staticmethod
    def _check_args(n: int, temperature: float) -> None:
        if n < 1:
            raise ConfigurationError(f"n must be >= 1, got {n}")
        if temperature < 0:
            raise ConfigurationError(f"temperature must be >= 0, got {temperature}")

    def _merge(self, responses: list[Any], n: int) -> Completion:
        texts: list[str] = []
        reasons: list[str] = []
        prompt_tokens = completion_tokens = 0
        for resp in responses:
            for choice in sorted(resp.choices, key=lambda c: c.index):
                texts.append(choice.message.content or "")
                reasons.append(choice.finish_reason or "")
            if resp.usage is not None:
                prompt_tokens += resp.usage.prompt_tokens or 0
                completion_tokens += resp.usage.completion_tokens or 0
        return Completion(
            texts=tuple(texts[:n]),
            model=(responses[0].model if responses else "") or self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            requests=len(responses),
            finish_reasons=tuple(reasons[:n]),
        )

    def _call(self, params: dict[str, Any]) -> Any:
        try:
            for attempt in Retrying(**self._retry_kwargs()):
                with attempt:
                    return self._client.chat.completions.create(**params)
        except Exception as exc:
            raise self._translate(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _acall(self, client: Any, params: dict[str, Any]) -> Any:
        try:
            async for attempt in AsyncRetrying(**self._retry_kwargs()):
                with attempt:
                    return await client.chat.completions.create(**params)
        except Exception as exc:
            raise self._translate(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _count(self, responses: list[Any]) -> int:
        return sum(len(r.choices) for r in responses)

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        self._check_args(n, temperature)
        first = self._call(self._params(prompt, n, temperature, max_tokens, seed))

        def one(i: int) -> Any:
            return self._call(self._one(prompt, temperature, max_tokens, seed, i))

        return self._merge(self._fill([first], n, one), n)

    def _one(
        self, prompt: Prompt, temperature: float, max_tokens: int | None, seed: int | None, i: int
    ) -> dict[str, Any]:
        return self._params(prompt, 1, temperature, max_tokens, None if seed is None else seed + i)

    def _fill(self, responses: list[Any], n: int, one: Callable[[int], Any]) -> list[Any]:
        """Request the samples a server that ignores ``n`` did not return, one at a time."""
        got = self._count(responses)
        if 0 < got < n:
            logger.debug(
                "%s returned %d of %d samples; requesting the rest one by one", self.base_url, got, n
            )
        while 0 < got < n:
            responses.append(one(got))
            got = self._count(responses)
        if got == 0:
            raise LLMError(f"the LLM endpoint {self.base_url} returned no choices")
        return responses

    async def _afill(self, responses: list[Any], n: int, one: Callable[[int], Awaitable[Any]]) -> list[Any]:
        got = self._count(responses)
        while 0 < got < n:
            responses.append(await one(got))
            got = self._count(responses)
        if got == 0:
            raise LLMError(f"the LLM endpoint {self.base_url} returned no choices")
        return responses

    def _aclient(self) -> Any:
        if self._async_client is not None:
            return self._async_client
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(**self._client_kwargs)
            self._async_clients[loop] = client
        return client

    async def acomplete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        self._check_args(n, temperature)
        client = self._aclient()
        responses = [await self._acall(client, self._params(prompt, n, temperature, max_tokens, seed))]

        def one(i: int) -> Awaitable[Any]:
            return self._acall(client, self._one(prompt, temperature, max_tokens, seed, i))

        return self._merge(await self._afill(responses, n, one), n)


def from_spec_arg(arg: str, **kwargs: Any) -> OpenAIChatModel:
    """``openai:MODEL``: honours ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (kwargs override)."""
    model = arg.strip() or os.environ.get("OPENAI_MODEL", "")
    if not model:
        raise ConfigurationError(
            "the spec 'openai:MODEL' needs a model name, for example 'openai:gpt-4o-mini' "
            "(or set OPENAI_MODEL)"
        )
    base_url = kwargs.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL") or None
    api_key = kwargs.pop("api_key", None) or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None and base_url is None and kwargs.get("client") is None:
        raise ConfigurationError(
            f"'openai:{model}' needs an API key: set OPENAI_API_KEY, or set OPENAI_BASE_URL to an "
            "OpenAI-compatible server (a local server such as llama.cpp, vLLM or Ollama needs no key)"
        )
    return OpenAIChatModel(model, base_url=base_url, api_key=api_key, **kwargs)
