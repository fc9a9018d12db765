"""Test helpers shipped with scopeguard, for our tests and for users' own.

:class:`ScriptedChatModel` replays scripted replies (or raises scripted errors) and records
every prompt it was given, so parsing and control flow can be tested without an LLM.
:class:`ScriptedVerdictScorer` does the same for log-prob verdicts (scripted margins).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import BaseChatModel, ChatMessage, Completion, Prompt, to_messages
from scopeguard.verdicts.base import VerdictScore

__all__ = ["RecordedCall", "ScriptedChatModel", "ScriptedVerdictScorer"]

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
    """

    def __init__(self, replies: Script, *, model: str = "scripted", supports_n: bool = True):
        self.model = model
        self.supports_n = supports_n
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
        return Completion(
            texts=texts,
            model=self.model,
            prompt_tokens=len(text.split()),
            completion_tokens=sum(len(t.split()) for t in texts),
        )


class ScriptedVerdictScorer:
    """A :class:`~scopeguard.verdicts.VerdictScorer` whose margins are scripted.

    ``margin(prompt_text) -> float`` returns log P(No) - log P(Yes) for the rendered prompt (the
    user message); every prompt is recorded in ``prompts``. Token counts are words.
    """

    def __init__(self, margin: Callable[[str], float], *, name: str = "scripted-verdicts") -> None:
        self._margin = margin
        self._name = name
        self.prompts: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        text = "\n".join(m.content for m in messages)
        self.prompts.append(text)
        m = float(self._margin(text))
        # split the margin symmetrically: P(Yes) + P(No) = 1
        p_no = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, m))))
        return VerdictScore(logp_yes=math.log(max(1e-300, 1 - p_no)), logp_no=math.log(max(1e-300, p_no)))

    def score_many(
        self, prompts: Sequence[Sequence[ChatMessage]], *, progress: bool | None = None
    ) -> list[VerdictScore]:
        return [self.score(p) for p in prompts]
