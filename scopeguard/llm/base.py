"""The chat-model protocol every LLM backend implements.

A backend turns a prompt (a string, or a list of chat messages) into one or more sampled
replies. Sync and async share one contract; :class:`BaseChatModel` derives the async twin
from the sync one (in a worker thread) for backends that have no native async client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict

from scopeguard.errors import ConfigurationError

__all__ = [
    "BaseChatModel",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "Prompt",
    "split_spec_options",
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

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion: ...

    async def acomplete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion: ...


class BaseChatModel:
    """Convenience base: implement :meth:`complete`; ``acomplete`` runs it in a thread."""

    model: str = ""

    @property
    def name(self) -> str:
        return self.model

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        raise NotImplementedError

    async def acomplete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        return await asyncio.to_thread(
            self.complete, prompt, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed
        )
