"""Scripted chat models for tests (published by :mod:`scopeguard.testing`): replies replayed in
order or computed from the prompt, scripted errors raised, every request recorded."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import BaseChatModel, BaseStreamingChatModel, Completion, Prompt, to_messages

__all__ = ["RecordedCall", "Reply", "Script", "ScriptedChatModel", "StreamingScriptedChatModel"]

Reply = str | BaseException
Script = Iterable[Reply] | Callable[[str], Reply]


@dataclass(frozen=True)
class RecordedCall:
    prompt: str
    n: int
    temperature: float
    max_tokens: int | None
    seed: int | None = None


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies are scripted.

    ``replies`` is either a sequence consumed in order (one item per sample: a request with
    ``n=3`` consumes three), or a callable ``prompt -> reply``. A reply that is an exception
    instance is raised instead of returned. When a sequence runs out, a
    :class:`ConfigurationError` says so (a test asked for more than it scripted).
    With ``truncate=True`` a reply of more than ``max_tokens`` words is cut to that many words
    and reported with ``finish_reason`` ``"length"``, as a real backend does at its cap.
    """

    def __init__(
        self, replies: Script, *, model: str = "scripted", supports_n: bool = True, truncate: bool = False
    ):
        self.model = model
        self.supports_n = supports_n
        self.truncate = truncate
        self.calls: list[RecordedCall] = []
        self._lock = threading.Lock()
        if callable(replies):
            self._fn: Callable[[str], Reply] | None = replies
            self._queue: list[Reply] = []
        else:
            self._fn = None
            self._queue = list(replies)

    @property
    def requests(self) -> int:
        return len(self.calls)

    def _next(self, prompt: str) -> str:
        if self._fn is not None:
            reply = self._fn(prompt)
        else:
            if not self._queue:
                raise ConfigurationError("ScriptedChatModel ran out of scripted replies")
            reply = self._queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        text = "\n".join(m.content for m in to_messages(prompt))
        with self._lock:
            self.calls.append(RecordedCall(text, n, temperature, max_tokens, seed))
            texts = tuple(self._next(text) for _ in range(n))
        reasons: tuple[str, ...] = ()
        if self.truncate:
            cut = [max_tokens is not None and len(t.split()) > max_tokens for t in texts]
            texts = tuple(
                " ".join(t.split()[:max_tokens]) if c and max_tokens is not None else t
                for t, c in zip(texts, cut, strict=True)
            )
            reasons = tuple("length" if c else "stop" for c in cut)
        return Completion(
            texts=texts,
            model=self.model,
            prompt_tokens=len(text.split()),
            completion_tokens=sum(len(t.split()) for t in texts),
            finish_reasons=reasons,
        )


class StreamingScriptedChatModel(ScriptedChatModel, BaseStreamingChatModel):
    """A :class:`ScriptedChatModel` that also streams (a
    :class:`~scopeguard.llm.base.StreamingChatModel`): each reply in word pieces (``"Hello "``,
    ``"there!"``), consuming one scripted reply per stream.

    ``streamed`` counts the pieces handed out, so a test can tell an early stop from a full read.
    """

    streamed = 0

    def stream(
        self,
        prompt: Prompt,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Iterator[str]:
        text = self.complete(prompt, temperature=temperature, max_tokens=max_tokens, seed=seed).text
        for piece in re.findall(r"\S+\s*|\s+", text):
            self.streamed += 1
            yield piece
