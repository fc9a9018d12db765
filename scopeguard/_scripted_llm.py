"""Scripted chat models for tests (published by :mod:`scopeguard.testing`): replies replayed in
order or computed from the prompt, scripted errors raised, every request recorded; and the
ELOQ-shaped fake LLM (:class:`EloqChatModel`, :func:`eloq_reply`) that answers every prompt of the
generator, which :class:`~scopeguard.testing.FakeOpenAIServer` serves when run on its own."""

from __future__ import annotations

import asyncio
import functools
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import (
    BaseChatModel,
    BaseStreamingChatModel,
    Completion,
    Prompt,
    SamplingArgs,
    StreamArgs,
    complete_keywords,
    stream_keywords,
    to_messages,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "EloqChatModel",
    "RecordedCall",
    "Reply",
    "Script",
    "ScriptedChatModel",
    "StreamingScriptedChatModel",
    "eloq_reply",
    "invented_document",
]

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

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        args = complete_keywords(sampling)
        n, max_tokens = args["n"], args["max_tokens"]
        text = "\n".join(m.content for m in to_messages(prompt))
        with self._lock:
            self.calls.append(RecordedCall(text, n, args["temperature"], max_tokens, args["seed"]))
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

    def stream(self, prompt: Prompt, **sampling: Unpack[StreamArgs]) -> Iterator[str]:
        text = self.complete(prompt, **stream_keywords(sampling)).text
        for piece in re.findall(r"\S+\s*|\s+", text):
            self.streamed += 1
            yield piece


# --- the ELOQ-shaped fake LLM ----------------------------------------------------------------

_ITEM = re.compile(r"^(\d+)\. (.+)$", re.MULTILINE)


def _last_block(prompt: str, header: str) -> list[str]:
    block = prompt.rsplit(header, 1)[1]
    block = re.split(r"\n\n", block.strip(), maxsplit=1)[0]
    return [m.group(2) for m in _ITEM.finditer(block)]


def _count(pattern: str, prompt: str) -> int:
    found = re.search(pattern, prompt)
    if found is None:
        raise ConfigurationError(f"eloq_reply: no count in the prompt {prompt[:200]!r}")
    return int(found.group(1))


def eloq_reply(prompt: str, *, answerable_word: str = "ANSWERABLE") -> str:
    """The reply a cooperative model would give to one of the ELOQ generator's prompts.

    Claims, recoveries (the masked facts come back as invented ferry sponsors), the removal step
    (drops the first hallucinated fact), one question per fact (the first one contains
    ``answerable_word``), in-scope questions, and the judge: "Yes" (out of scope) unless the
    question contains ``answerable_word``. Any other prompt raises :class:`ConfigurationError`.
    """
    if "The answer is: Yes or No" in prompt:
        verdict = "No" if answerable_word in prompt.rsplit("Question:", 1)[-1] else "Yes"
        return f"The question names a detail the document never mentions.\nThe answer is: {verdict}"
    if prompt.rstrip().endswith("most important facts:"):
        n = _count(r"list (\d+) most important facts", prompt)
        return "Here are the facts:\n" + "\n".join(
            f"{i}. The council of Alderby approved spending plan {i} for the harbour district."
            for i in range(1, n + 1)
        )
    if prompt.rstrip().endswith("Completed list of facts:"):
        facts = [m.group(2) for m in _ITEM.finditer(prompt.split('"""')[1])]
        return "\n".join(
            f"{i}. A regional ferry operator {i} agreed to sponsor the plan in {2020 + i}."
            if f == "(missing)"
            else f"{i}. {f}"
            for i, f in enumerate(facts, 1)
        )
    if "Write only your guesses" in prompt:
        numbers = re.findall(r"^(\d+)\. <your guess for fact \d+>$", prompt, re.MULTILINE)
        return "\n".join(
            f"{m}. A regional ferry operator {m} agreed to sponsor the plan in {2020 + int(m)}."
            for m in numbers
        )
    if prompt.rstrip().endswith("Remaining hallucinated facts:"):
        facts = _last_block(prompt, "hallucinated facts:\n")
        return "\n".join(f"{i}. {f}" for i, f in enumerate(facts, 1) if i != 1)
    if "hallucinated facts:" in prompt and prompt.rstrip().endswith("Questions:"):
        facts = _last_block(prompt, "hallucinated facts:\n")
        questions = []
        for i, f in enumerate(facts, 1):
            word = f" {answerable_word}" if i == 1 else ""
            op = re.search(r"operator (\d+)", f)
            ref = op.group(1) if op else "X"
            questions.append(
                f"{i}. Why did regional ferry operator {ref} decide to sponsor"
                f" the harbour plan{word} that year?"
            )
        return "\n".join(questions)
    if "questions that the document directly answers" in prompt:
        n = _count(r"top (\d+) questions", prompt)
        return "\n".join(
            f"{i}. Which spending plan number {i} did the council of Alderby approve for the harbour?"
            for i in range(1, n + 1)
        )
    raise ConfigurationError(f"eloq_reply got an unexpected prompt: {prompt[:200]!r}")


def invented_document(topic: str, words: int = 180) -> str:
    """An invented document of about ``words`` words about ``topic`` (for generator tests)."""
    sentence = (
        f"The council of Alderby discussed the {topic} plan for the harbour district on Monday evening. "
    )
    n = len(sentence.split())
    return (sentence * (words // n + 1)).strip()


class EloqChatModel(ScriptedChatModel):
    """A fake LLM that answers every ELOQ generator prompt in the expected shapes (:func:`eloq_reply`).

    ``latency`` seconds are awaited (without blocking) on each async request, as with a remote
    endpoint; ``keep_calls=False`` forgets each request once answered (long benchmark runs).
    """

    def __init__(
        self,
        *,
        model: str = "fake-eloq",
        answerable_word: str = "ANSWERABLE",
        latency: float = 0.0,
        keep_calls: bool = True,
        supports_n: bool = True,
    ) -> None:
        super().__init__(
            functools.partial(eloq_reply, answerable_word=answerable_word), model=model, supports_n=supports_n
        )
        self.latency = latency
        self.keep_calls = keep_calls

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        args = complete_keywords(sampling)
        if self.latency:
            await asyncio.sleep(self.latency)
            done = self.complete(prompt, **args)
        else:
            done = await super().acomplete(prompt, **args)
        if not self.keep_calls:
            with self._lock:
                self.calls.clear()
        return done
