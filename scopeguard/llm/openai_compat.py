"""OpenAI-compatible chat backend (OpenAI, Azure, vLLM, Ollama, llama.cpp server, Together...).

``from_spec("openai:gpt-4o-mini")`` reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``; any server
speaking the OpenAI chat API works by setting the base URL (a base URL needs no key). Options
follow a ``?``: ``openai:gpt-4o-mini?deadline=20&timeout=10`` (see :func:`from_spec_arg`).

* Retries (their plumbing is :mod:`scopeguard.llm._openai_retry`) with exponential backoff and
  jitter (tenacity) on 408/409/429/5xx and timeouts; a
  ``Retry-After`` header (seconds or an HTTP date) sets the wait instead. A refused connection
  is retried only ``connect_attempts`` times (default 2) so a server that is down is reported
  fast. After the last attempt an unreachable endpoint raises
  :class:`~scopeguard.errors.LLMConnectionError` naming the URL.
* Bounded time: a deadline (``deadline=`` here, or an ambient one from
  :func:`scopeguard.llm.deadline.deadline` / ``Guard(deadline=...)``) caps each request's timeout
  and stops retrying when the next wait would not fit; then
  :class:`~scopeguard.errors.LLMTimeoutError` is raised.
* Every failure is a :class:`~scopeguard.errors.ScopeGuardError` naming the endpoint: transport
  errors are ``LLMConnectionError``; a reply that is not a chat completion (not JSON, an HTML
  page, ``{"object": "error"}``, no ``choices``, a choice without text) is
  :class:`~scopeguard.errors.LLMResponseError`. The API key, anything like ``sk-...`` and
  ``Bearer ...`` are redacted from messages and log lines (a server may echo them).
* ``n`` samples go in one request; when the server ignores ``n`` (returns fewer choices) the
  missing samples are requested one at a time. ``n`` is a per-call argument: nothing sticks
  to the client between calls.
* ``stream``/``astream`` yield one reply token by token (``"stream": true``, server-sent
  events), so the model is a :class:`~scopeguard.llm.base.StreamingChatModel`. Retries and
  typed errors apply up to the first event; after it a dropped connection, a stall past the
  deadline or a broken event raises the same typed errors (no retry: text was handed out).
* ``on_rate_limit`` (optional) is called with the server's ``Retry-After`` (or ``None``) each
  time a 429 is about to be retried, so a caller's concurrency limiter
  (:class:`scopeguard.llm.concurrency.AdaptiveLimiter`) sees rate limits the retries hide;
  ``rate_limits`` counts them.
* ``request_body`` is the JSON body one call sends (requests are built by
  :mod:`scopeguard.llm._openai_request`) and ``call_api`` runs any other SDK call through the
  same retries and errors: what the Batch API mode (:mod:`scopeguard.batch`) uses.
* ``complete`` uses the sync SDK client, ``acomplete`` the async one (one per event loop); both
  go through :meth:`OpenAIChatModel.chat_completion` / ``achat_completion``, which serve any
  other single request (for example one asking for log-probabilities).
* ``text_completion`` / ``atext_completion`` send one request to the completions endpoint: a raw
  prompt the server reads without applying a chat template (what a served reader sends, so that
  the server reads the exact text an in-process read does).
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import openai
from openai.types import Completion as TextCompletion
from tenacity import (
    wait_exponential_jitter,
)

from scopeguard.errors import (
    ConfigurationError,
    LLMResponseError,
    ScopeGuardError,
)
from scopeguard.llm._openai_replies import (
    merge,
    snippet,
    validate,
)
from scopeguard.llm._openai_request import ChatRequests, post_chat
from scopeguard.llm._openai_retry import RetryCall, RetryingEndpoint
from scopeguard.llm._openai_stream import END, StreamReader, afirst, first
from scopeguard.llm.base import (
    BaseChatModel,
    Completion,
    Prompt,
    SamplingArgs,
    StreamArgs,
    split_spec_options,
)
from scopeguard.llm.deadline import Budget, deadline, validate_seconds

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["OpenAIChatModel", "from_spec_arg"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
_Post = Callable[[Any, dict[str, Any], float], Any]
"""Sends a request body with an attempt's timeout through an SDK client (:func:`post_chat`)."""
_Check = Callable[..., Any]
"""A reply when it is usable, else a typed error: ``check(reply, url, *secrets)`` (:func:`validate`)."""
_NO_KEY = "sk-no-key-required"


class OpenAIChatModel(RetryingEndpoint, ChatRequests, BaseChatModel):
    """A chat model behind an OpenAI-compatible HTTP API.

    Args:
        model: the model name the server expects.
        base_url: the API root (``http://127.0.0.1:8080/v1``); ``None`` = api.openai.com.
        api_key: the key; may be omitted when ``base_url`` is given.
        timeout: seconds per request (capped by what is left of the deadline).
        deadline: seconds for one whole call (:meth:`complete`, :meth:`chat_completion`...),
            every retry and wait included; ``None``: only the ambient deadline, if any
            (:func:`scopeguard.llm.deadline.deadline`, ``Guard(deadline=...)``). Past it the call
            raises :class:`~scopeguard.errors.LLMTimeoutError`.
        max_attempts: attempts for rate limits, 5xx and timeouts.
        connect_attempts: attempts when the connection is refused / DNS fails.
        backoff: the first retry wait in seconds (doubles, with jitter, up to ``max_backoff``).
            A ``Retry-After`` header on the error replaces the backoff.
        max_tokens: the reply cap used when a call passes ``max_tokens=None`` (``None``: the
            server's default).
        extra_body: extra JSON fields sent with every request (server-specific options).
        client, async_client: prebuilt SDK clients (for example ``openai.AzureOpenAI``); when
            given, ``base_url``/``api_key`` are ignored. Set their ``max_retries=0``.
        on_rate_limit: called with the ``Retry-After`` seconds (``None`` when not sent) before
            each retry of a 429 reply; ``rate_limits`` counts them.
    """

    supports_n = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        deadline: float | None = None,
        max_attempts: int = 4,
        connect_attempts: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
        client: Any = None,
        async_client: Any = None,
        on_rate_limit: Callable[[float | None], None] | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("the OpenAI-compatible backend needs a model name")
        if max_attempts < 1 or connect_attempts < 1:
            raise ConfigurationError("max_attempts and connect_attempts must be >= 1")
        self.model = model
        self.timeout = validate_seconds(timeout, "timeout") or 60.0
        self.deadline = validate_seconds(deadline)
        self.max_attempts = max_attempts
        self.connect_attempts = connect_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self.on_rate_limit = on_rate_limit
        self.rate_limits = 0
        self._api_key = api_key
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
        self._backoff = wait_exponential_jitter(initial=self.backoff, max=self.max_backoff)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def api_key(self) -> str | None:
        """The key the requests carry (``None``: none; never in ``repr``, errors or logs)."""
        key = self._secret
        return None if key == _NO_KEY else key

    @property
    def _secret(self) -> str | None:
        key = self._api_key or getattr(self._client, "api_key", None)
        return key if isinstance(key, str) else None

    # -- requests -------------------------------------------------------------------------
    def chat_completion(self, params: dict[str, Any]) -> Any:
        """One logical request: ``params`` are the SDK's ``chat.completions.create`` arguments
        (``model`` defaults to this model's; ``timeout`` caps each attempt). Runs through the
        retries, the deadline and the error translation, and returns the SDK response, checked to
        have a non-empty ``choices`` list of messages. Every failure is a ScopeGuardError."""
        return self._posted(params, post_chat, validate)

    async def achat_completion(self, params: dict[str, Any]) -> Any:
        """Async twin of :meth:`chat_completion` (the async SDK client, one per event loop)."""
        return await self._aposted(params, post_chat, validate)

    def text_completion(self, params: dict[str, Any]) -> Any:
        """One request to the completions endpoint (``/completions``): ``params`` carry a raw
        ``prompt`` the server reads as it is, with no chat template of its own (``model`` defaults
        to this model's). Same retries, deadline and typed errors as :meth:`chat_completion`;
        returns the SDK's ``Completion``, checked to have a non-empty ``choices`` list of texts."""
        return self._posted(params, _post_text, _validate_text)

    async def atext_completion(self, params: dict[str, Any]) -> Any:
        """Async twin of :meth:`text_completion` (the async SDK client, one per event loop)."""
        return await self._aposted(params, _post_text, _validate_text)

    def _posted(self, params: dict[str, Any], post: _Post, check: _Check) -> Any:
        """One logical request of ``params``: ``post(client, body, attempt_timeout)`` through the
        retries, the deadline and the error translation, its reply checked by ``check``."""
        body, timeout = self._body(params)
        with deadline(self.deadline):
            reply = self._send(lambda t: post(self._client, body, t), timeout)
            return check(reply, self.base_url, self._secret)

    async def _aposted(self, params: dict[str, Any], post: _Post, check: _Check) -> Any:
        """Async twin of :meth:`_posted` (the async SDK client, one per event loop)."""
        body, timeout = self._body(params)
        client = self._aclient()
        with deadline(self.deadline):
            reply = await self._asend(lambda t: post(client, body, t), timeout)
            return check(reply, self.base_url, self._secret)

    def call_api(self, fn: Callable[[Any], T], *, retry: bool = True) -> T:
        """``fn(client)`` on the sync SDK client (files, batches...) with the same typed errors as
        a chat request, and its retries and deadline unless ``retry=False`` (a call that must not
        be sent twice, such as creating a batch)."""
        if not retry:
            try:
                return fn(self._client)
            except ScopeGuardError:
                raise
            except Exception as exc:
                raise self._translate(exc, RetryCall(attempts=1)) from self._cause(exc)
        with deadline(self.deadline):
            return self._send(lambda _t: fn(self._client), self.timeout)

    def _merge(self, responses: list[Any], n: int) -> Completion:
        return merge(responses, n, self.model, self.base_url, self._secret)

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        args = self._checked(sampling)
        with deadline(self.deadline):  # one budget for the first request and the fill-ups
            responses = [self.chat_completion(self._params(prompt, **args))]
            while (one := self._fill_up(prompt, args, responses)) is not None:
                responses.append(self.chat_completion(one))
            return self._merge(responses, args["n"])

    def _aclient(self) -> Any:
        if self._async_client is not None:
            return self._async_client
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            # our own HTTP client, not the SDK's default one: that one, collected after its loop
            # closed while another runs (a model in a reference cycle, asyncio.run called again),
            # schedules its aclose() on the running loop, which fails and asyncio logs "Task
            # exception was never retrieved ... Event loop is closed"; this one is just dropped
            http = openai.DefaultAsyncHttpxClient(timeout=self._client_kwargs["timeout"])
            client = openai.AsyncOpenAI(**self._client_kwargs, http_client=http)
            self._async_clients[loop] = client
        return client

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        args = self._checked(sampling)
        with deadline(self.deadline):
            responses = [await self.achat_completion(self._params(prompt, **args))]
            while (one := self._fill_up(prompt, args, responses)) is not None:
                responses.append(await self.achat_completion(one))
            return self._merge(responses, args["n"])

    # -- streaming ----------------------------------------------------------------------------
    async def aopen_stream(self, params: dict[str, Any]) -> tuple[Any, Any]:
        """A streamed chat request relayed as it is (a proxy): ``params`` as for
        :meth:`achat_completion`. Returns the SDK's stream of JSON events and its first event
        (``None``: the stream was empty), opened and first read through the retries, the deadline
        and the typed errors; reading the rest, and closing the stream, is the caller's."""
        body, timeout = self._body({**params, "stream": True})
        client = self._aclient()

        def opening(t: float) -> Any:
            return client.post(
                "/chat/completions",
                cast_to=object,  # plain JSON events: a proxy passes on fields the SDK does not know
                body=body,
                options={"timeout": t},
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )

        with deadline(self.deadline):
            events, chunk = await self._asend(lambda t: afirst(opening(t)), timeout)
        return events, None if chunk is END else chunk

    def _reader(self, budget: Budget | None) -> StreamReader:
        after_first = RetryCall(attempts=1)  # a failure mid-stream is not retried
        return StreamReader(
            self.base_url, self._secret, budget, lambda exc: self._translate(exc, after_first), self._cause
        )

    def stream(self, prompt: Prompt, **sampling: Unpack[StreamArgs]) -> Iterator[str]:
        """The reply piece by piece as the server generates it (``"stream": true``, server-sent
        events). Opening the stream and reading its first event go through the retries; the
        deadline bounds the whole stream; a failure after the first event (a dropped connection, a
        stall, a broken event) raises the typed error without a retry."""
        request, timeout = self._stream_request(prompt, sampling)
        create = self._client.chat.completions.create
        with deadline(self.deadline) as budget:
            events, chunk = self._send(lambda t: first(create(**request, timeout=t)), timeout)
        yield from self._reader(budget).pieces(events, chunk)

    async def astream(self, prompt: Prompt, **sampling: Unpack[StreamArgs]) -> AsyncIterator[str]:
        """Async twin of :meth:`stream` (the async SDK client); the deadline is a hard stop."""
        request, timeout = self._stream_request(prompt, sampling)
        create = self._aclient().chat.completions.create
        with deadline(self.deadline) as budget:
            events, chunk = await self._asend(lambda t: afirst(create(**request, timeout=t)), timeout)
        async for piece in self._reader(budget).apieces(events, chunk):
            yield piece


def _post_text(client: Any, body: dict[str, Any], timeout: float) -> Any:
    """POST a completions request (plain JSON, sync or async client alike)."""
    return client.post("/completions", cast_to=TextCompletion, body=body, options={"timeout": timeout})


def _validate_text(reply: Any, url: str, *secrets: str | None) -> Any:
    """``reply`` when it is a completion with a non-empty ``choices`` list of texts."""
    choices = None if isinstance(reply, str | bytes) else getattr(reply, "choices", None)
    if (
        not isinstance(choices, list)
        or not choices
        or any(not isinstance(getattr(c, "text", None), str) for c in choices)
    ):
        body = snippet(reply, *secrets)
        raise LLMResponseError(
            f"the LLM endpoint {url} sent a reply that is not a text completion ({body})", reply=body
        )
    return reply


_SPEC_OPTIONS: dict[str, Callable[[str], Any]] = {
    "base_url": str,
    "deadline": float,
    "timeout": float,
    "max_attempts": int,
    "connect_attempts": int,
    "backoff": float,
    "max_backoff": float,
    "max_tokens": int,
}


def from_spec_arg(arg: str, **kwargs: Any) -> OpenAIChatModel:
    """``openai:MODEL[?option=value&...]``: honours ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``.

    Options (URL-query style): ``deadline``, ``timeout``, ``max_attempts``, ``connect_attempts``,
    ``backoff``, ``max_backoff``, ``max_tokens`` and ``base_url``, e.g.
    ``openai:gpt-4o-mini?deadline=20&timeout=10``. The key is never read from the spec (it would
    show in shell history and process lists). Keyword arguments override options, options
    override the environment; ``max_retries=N`` (LangChain's name) means ``max_attempts=N+1``.
    """
    name, options = split_spec_options(arg, _SPEC_OPTIONS, backend="openai")
    options.update(kwargs)
    if (retries := options.pop("max_retries", None)) is not None:
        attempts = options.setdefault("max_attempts", int(retries) + 1)
        if attempts != int(retries) + 1:
            raise ConfigurationError(f"max_attempts {attempts} and max_retries {retries} disagree: give one")
    model = name.strip() or os.environ.get("OPENAI_MODEL", "")
    if not model:
        raise ConfigurationError(
            "the spec 'openai:MODEL' needs a model name, for example 'openai:gpt-4o-mini' "
            "(or set OPENAI_MODEL)"
        )
    base_url = options.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL") or None
    api_key = options.pop("api_key", None) or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None and base_url is None and options.get("client") is None:
        raise ConfigurationError(
            f"'openai:{model}' needs an API key: set OPENAI_API_KEY, or set OPENAI_BASE_URL to an "
            "OpenAI-compatible server (a local server such as llama.cpp, vLLM or Ollama needs no key)"
        )
    return OpenAIChatModel(model, base_url=base_url, api_key=api_key, **options)
