"""What one call to an OpenAI-compatible server sends: the chat parameters of a prompt, the JSON
body (``extra_body`` merged in) and each attempt's timeout.

:class:`ChatRequests` is the half of :class:`~scopeguard.llm.openai_compat.OpenAIChatModel` that
builds requests; :func:`post_chat` posts a ready body through an SDK client. Sending them through
the retries is :mod:`scopeguard.llm._openai_retry`'s; reading the replies,
:mod:`scopeguard.llm._openai_replies`'.
"""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletion

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import Prompt, to_messages

__all__ = ["ChatRequests", "post_chat"]


def post_chat(client: Any, body: dict[str, Any], timeout: float) -> Any:
    """``POST /chat/completions`` with a ready JSON body through the SDK client (sync or async:
    the async client returns an awaitable); the reply is the SDK's ``ChatCompletion``."""
    return client.post("/chat/completions", cast_to=ChatCompletion, body=body, options={"timeout": timeout})


class ChatRequests:
    """The requests of one chat model (a mixin: the model sets the attributes below)."""

    model: str
    timeout: float
    max_tokens: int | None
    extra_body: dict[str, Any]

    def _body(self, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The JSON body of a chat request (``extra_body`` merged in, as the SDK would) and the
        per-attempt timeout. It is posted as it is: the body is plain JSON already, so the SDK's
        parameter transform (about 2 ms of CPU per request, a third of the client's cost at high
        concurrency; ``benchmarks/scale.py``) has nothing to do."""
        request, timeout = self._request(params)
        extra = request.pop("extra_body", None) or {}
        return {**request, **extra}, timeout

    def _request(self, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        request = {"model": self.model, **params}
        if self.extra_body and "extra_body" not in request:
            request["extra_body"] = self.extra_body
        timeout = request.pop("timeout", None)
        return request, float(timeout) if isinstance(timeout, int | float) else self.timeout

    def request_body(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """The JSON body ``complete`` sends for these arguments (``extra_body`` merged in), as
        a Batch API input line carries it."""
        self._check_args(n, temperature)
        return {**self._params(prompt, n, temperature, max_tokens, seed), **self.extra_body}

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
        return params

    @staticmethod
    def _check_args(n: int, temperature: float) -> None:
        if n < 1:
            raise ConfigurationError(f"n must be >= 1, got {n}")
        if temperature < 0:
            raise ConfigurationError(f"temperature must be >= 0, got {temperature}")

    def _stream_request(
        self, prompt: Prompt, temperature: float, max_tokens: int | None, seed: int | None
    ) -> tuple[dict[str, Any], float]:
        self._check_args(1, temperature)
        return self._request({**self._params(prompt, 1, temperature, max_tokens, seed), "stream": True})
