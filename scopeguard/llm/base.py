"""The chat-model protocol every LLM backend implements.

A backend turns a prompt (a string, or a list of chat messages) into one or more sampled
replies. Sync and async share one contract; :class:`BaseChatModel` derives the async twin
from the sync one (in a worker thread) for backends that have no native async client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

__all__ = ["BaseChatModel", "ChatMessage", "ChatModel", "Completion", "Prompt", "to_messages"]


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
