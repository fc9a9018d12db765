"""The chat-model protocol every LLM backend implements.

A backend turns a prompt (a string, or a list of chat messages) into one or more sampled
replies. Sync and async share one contract; :class:`BaseChatModel` derives the async twin
from the sync one (in a worker thread) for backends that have no native async client.

A backend that can also hand out one reply as it is generated implements
:class:`StreamingChatModel` (``stream``/``astream`` yield text pieces, token by token);
:class:`BaseStreamingChatModel` derives ``astream`` from a sync ``stream`` (in worker threads).

The sampling keywords are one typed set, :class:`SamplingArgs` (``complete``) and
:class:`StreamArgs` (``stream``); a wrapper takes them as ``**sampling`` and passes on
:func:`complete_keywords` / :func:`stream_keywords` (every keyword, its default filled in).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict

from scopeguard.errors import ConfigurationError

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "BaseChatModel",
    "BaseStreamingChatModel",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "Prompt",
    "SamplingArgs",
    "StreamArgs",
    "StreamUsage",
    "StreamingChatModel",
    "check_sampling",
    "complete_keywords",
    "split_spec_options",
    "stream_in_thread",
    "stream_keywords",
    "to_messages",
]


class ChatMessage(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str
    content: str


Prompt = str | Sequence[ChatMessage]


class Completion(BaseModel):
    """The replies to one request. ``texts`` holds ``n`` samples."""

    model_config = ConfigDict(frozen=True)

    texts: tuple[str, ...]
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 1
    finish_reasons: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""


def to_messages(prompt: Prompt) -> list[ChatMessage]:
    """A bare string becomes one user message."""
    if isinstance(prompt, str):
        return [ChatMessage(role="user", content=prompt)]
    return list(prompt)


class StreamArgs(TypedDict, total=False):
    """The sampling keywords of :meth:`StreamingChatModel.stream` (``temperature`` 0.0,
    ``max_tokens`` and ``seed`` ``None`` when left out)."""

    temperature: float
    max_tokens: int | None
    seed: int | None


class SamplingArgs(StreamArgs, total=False):
    """The sampling keywords of :meth:`ChatModel.complete`: a stream's and ``n`` (1 when left out)."""

    n: int


def _only(args: Mapping[str, Any], keys: frozenset[str]) -> None:
    """A keyword outside ``keys`` is a TypeError, as a call with explicit parameters raises."""
    for key in args:
        if key not in keys:
            raise TypeError(f"got an unexpected keyword argument {key!r}")


def stream_keywords(args: StreamArgs) -> StreamArgs:
    """Every keyword of :meth:`StreamingChatModel.stream`, the defaults filled in where ``args``
    leaves one out (what a wrapper passes on); any other keyword raises TypeError."""
    _only(args, StreamArgs.__optional_keys__)
    return {
        "temperature": args.get("temperature", 0.0),
        "max_tokens": args.get("max_tokens"),
        "seed": args.get("seed"),
    }


def complete_keywords(args: SamplingArgs) -> SamplingArgs:
    """Every keyword of :meth:`ChatModel.complete`, the defaults filled in where ``args`` leaves
    one out (what a wrapper passes on); any other keyword raises TypeError."""
    _only(args, SamplingArgs.__optional_keys__)
    return {
        "n": args.get("n", 1),
        "temperature": args.get("temperature", 0.0),
        "max_tokens": args.get("max_tokens"),
        "seed": args.get("seed"),
    }


def check_sampling(n: int, temperature: float) -> None:
    """Raise ConfigurationError for fewer than one sample or a negative temperature."""
    if n < 1:
        raise ConfigurationError(f"n must be >= 1, got {n}")
    if temperature < 0:
        raise ConfigurationError(f"temperature must be >= 0, got {temperature}")


def split_spec_options(
    arg: str, options: Mapping[str, Callable[[str], Any]], *, backend: str
) -> tuple[str, dict[str, Any]]:
    """Split ``"NAME?key=value&key=value"`` into ``NAME`` and the converted options.

    ``options`` maps each valid key to its converter (``float``, ``int``, ``str``). A key not in
    ``options``, a repeated key or a value the converter rejects raises ConfigurationError.
    """
    name, sep, query = arg.partition("?")
    if not sep:
        return name, {}
    valid = ", ".join(sorted(options))
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ConfigurationError(
            f"cannot read the options {query!r} of the {backend!r} spec: write them as "
            f"'{backend}:NAME?key=value&key=value' (valid keys: {valid})"
        ) from None
    out: dict[str, Any] = {}
    for key, raw in pairs:
        if key not in options:
            raise ConfigurationError(
                f"unknown option {key!r} in the {backend!r} spec; valid options: {valid}"
            )
        if key in out:
            raise ConfigurationError(f"the option {key!r} is given twice in the {backend!r} spec")
        try:
            out[key] = options[key](raw)
        except ValueError:
            kind = getattr(options[key], "__name__", "value")
            raise ConfigurationError(
                f"the option {key}={raw!r} of the {backend!r} spec is not a valid {kind}"
            ) from None
    return name, out


@runtime_checkable
class ChatModel(Protocol):
    """What scopeguard needs from an LLM."""

    @property
    def name(self) -> str: ...

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        """``n`` replies to ``prompt``; the keywords are :class:`SamplingArgs` (``n`` 1,
        ``temperature`` 0.0, ``max_tokens`` and ``seed`` ``None`` when left out)."""
        ...

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        """Async twin of :meth:`complete` (the same keywords)."""
        ...


class BaseChatModel:
    """Convenience base: implement :meth:`complete`; ``acomplete`` runs it in a thread."""

    model: str = ""

    @property
    def name(self) -> str:
        return self.model

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        raise NotImplementedError

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        return await asyncio.to_thread(self.complete, prompt, **complete_keywords(sampling))


class StreamUsage(str):
    """The last piece a stream may yield: no text (``""``), the reply's token usage as attributes.

    ``"".join(model.stream(prompt))`` is unchanged by it; a consumer that reports usage checks
    ``isinstance(piece, StreamUsage)`` (the LangChain adapter puts it on the last chunk). Backends
    that know the counts yield it (``local``); others end without it.
    """

    prompt_tokens: int
    completion_tokens: int
    finish_reason: str

    def __new__(cls, prompt_tokens: int, completion_tokens: int, finish_reason: str = "") -> StreamUsage:
        piece = super().__new__(cls, "")
        piece.prompt_tokens = prompt_tokens
        piece.completion_tokens = completion_tokens
        piece.finish_reason = finish_reason
        return piece

    def __repr__(self) -> str:
        return (
            f"StreamUsage(prompt_tokens={self.prompt_tokens}, completion_tokens={self.completion_tokens}, "
            f"finish_reason={self.finish_reason!r})"
        )


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A chat model that can also stream one reply as text pieces (token by token).

    ``"".join(model.stream(prompt))`` is the reply ``model.complete(prompt).text`` would give
    (at temperature 0, up to the backend's determinism); the last piece may be a
    :class:`StreamUsage` (empty text, the token counts). Errors are the same typed
    :class:`~scopeguard.errors.ScopeGuardError` as ``complete`` raises, before the first piece or
    in the middle of the stream; closing the iterator early releases the request.
    """

    def stream(self, prompt: Prompt, **sampling: Unpack[StreamArgs]) -> Iterator[str]:
        """One reply to ``prompt`` as text pieces; the keywords are :class:`StreamArgs`
        (``temperature`` 0.0, ``max_tokens`` and ``seed`` ``None`` when left out)."""
        ...

    def astream(self, prompt: Prompt, **sampling: Unpack[StreamArgs]) -> AsyncIterator[str]:
        """Async twin of :meth:`stream` (the same keywords)."""
        ...


async def stream_in_thread(pieces: Iterator[str]) -> AsyncIterator[str]:
    """Advance a sync stream in worker threads (``astream`` for a backend without async I/O).

    The iterator is closed when the consumer stops early, so the backend releases its request
    (or its model lock).
    """
    done = object()
    try:
        while (piece := await asyncio.to_thread(next, pieces, done)) is not done:
            yield piece if isinstance(piece, StreamUsage) else str(piece)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            await asyncio.to_thread(close)


class BaseStreamingChatModel(BaseChatModel):
    """Convenience base for a :class:`StreamingChatModel`: implement :meth:`complete` and
    :meth:`stream`; ``astream`` advances ``stream`` in worker threads."""

    def stream(self, prompt: Prompt, **sampling: Unpack[StreamArgs]) -> Iterator[str]:
        raise NotImplementedError

    async def astream(self, prompt: Prompt, **sampling: Unpack[StreamArgs]) -> AsyncIterator[str]:
        async for piece in stream_in_thread(self.stream(prompt, **stream_keywords(sampling))):
            yield piece
