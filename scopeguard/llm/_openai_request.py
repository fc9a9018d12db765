"""What one call to an OpenAI-compatible server sends: the chat parameters of a prompt, the JSON
body (``extra_body`` merged in) and each attempt's timeout.

:class:`ChatRequests` is the half of :class:`~scopeguard.llm.openai_compat.OpenAIChatModel` that
builds requests; :func:`post_chat` posts a ready body through an SDK client. Sending them through
the retries is :mod:`scopeguard.llm._openai_retry`'s; reading the replies,
:mod:`scopeguard.llm._openai_replies`'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openai.types.chat import ChatCompletion

from scopeguard.llm.base import (
    Prompt,
    SamplingArgs,
    StreamArgs,
    check_sampling,
    complete_keywords,
    stream_keywords,
    to_messages,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

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

    def request_body(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> dict[str, Any]:
        """The JSON body ``complete`` sends for these arguments (``extra_body`` merged in), as
        a Batch API input line carries it."""
        return {**self._params(prompt, **self._checked(sampling)), **self.extra_body}

    @staticmethod
    def _checked(sampling: SamplingArgs) -> SamplingArgs:
        """Every sampling keyword of a ``complete`` call, defaults filled in, checked."""
        args = complete_keywords(sampling)
        check_sampling(args["n"], args["temperature"])
        return args

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

    def _fill_up(self, prompt: Prompt, args: SamplingArgs, responses: list[Any]) -> dict[str, Any] | None:
        """The request of the next missing sample where ``responses`` hold fewer than ``args["n"]``
        choices (a server that ignores ``n``: one at a time); ``None`` once they hold them all."""
        got = sum(len(r.choices) for r in responses)
        if got >= args["n"]:
            return None
        seed = args["seed"]
        return self._params(
            prompt, 1, args["temperature"], args["max_tokens"], None if seed is None else seed + got
        )

    def _stream_request(self, prompt: Prompt, sampling: StreamArgs) -> tuple[dict[str, Any], float]:
        args = stream_keywords(sampling)
        check_sampling(1, args["temperature"])
        return self._request({**self._params(prompt, 1, **args), "stream": True})
