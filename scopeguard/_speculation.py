"""Speculative answers: the answer starts beside the check and is held until its verdict.

A :class:`HeldAnswer` (a worker thread) or :class:`AsyncHeldAnswer` (an asyncio task) runs
``produce(tally)``, which gives the answer's chunks (a single one for an answer that is not
streamed) and may record the tokens its LLM reports on the :class:`Tally`. The chunks wait in a
queue. :meth:`~HeldAnswer.release` hands them over (those held, then the rest as they come);
:meth:`~HeldAnswer.discard` stops the answer and returns what it cost, a :class:`DiscardedCost`.
A task is cancelled (closing its HTTP request); a thread cannot be, so it stops at its next chunk
and a call that does not stream runs to its end unseen. Nothing a discarded answer produced is
handed on, raised or logged: its chunks and its error stay in the queue.

Both kinds share :class:`_Held` (the tally, the queue's items, the cost); they differ only in how
they run and wait. :func:`held_responder` turns a held answer into the responder
``(question, documents) -> str`` that the policies call (``flag``, ``hedge``), and
:func:`speculation_metadata` is what a result records about it (:func:`settled` /
:func:`asettled` add it to a result). :func:`start_answer` / :func:`astart_answer` start the
guard's own answer (its responder's, or its LLM's, tokens counted by :class:`CountingChatModel`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatModel, Completion, Prompt, SamplingArgs, complete_keywords
from scopeguard.policies import Responder, allm_answer, llm_answer
from scopeguard.types import Document, GuardResult

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "AsyncHeldAnswer",
    "CountingChatModel",
    "DiscardedCost",
    "HeldAnswer",
    "Tally",
    "asettled",
    "astart_answer",
    "held_responder",
    "settled",
    "speculation_metadata",
    "start_answer",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_CHUNK, _END, _ERROR = "chunk", "end", "error"


@dataclass
class Tally:
    """What a speculative answer has produced so far: its chunks, the completion tokens its LLM
    reported (``None``: none reported) and, once it ran to its end, when."""

    started: float = field(default_factory=time.perf_counter)
    chunks: int = 0
    tokens: int | None = None
    ended: float | None = None

    def add_tokens(self, n: int) -> None:
        """Count ``n`` completion tokens the LLM reported."""
        self.tokens = (self.tokens or 0) + int(n)


@dataclass(frozen=True)
class DiscardedCost:
    """What a speculative answer dropped by its verdict cost: the ``seconds`` it ran (until its end,
    or until it was dropped) and its ``tokens``, the LLM's own count (``counted="tokens"``) or,
    when the LLM reports none, the chunks received (``counted="chunks"``). ``finished``: it had
    ended when dropped, so nothing of it went uncounted."""

    seconds: float
    tokens: int
    counted: Literal["tokens", "chunks"]
    finished: bool

    @classmethod
    def from_metadata(cls, record: dict[str, Any]) -> DiscardedCost | None:
        """The cost a result's ``metadata["speculation"]`` records (``None``: it was released)."""
        if record.get("outcome") != "discarded":
            return None
        seconds, tokens = float(record["seconds"]), int(record["tokens"])
        return cls(seconds, tokens, record["counted"], bool(record["finished"]))

    def metadata(self) -> dict[str, Any]:
        """The cost as a result's ``metadata["speculation"]``."""
        return {
            "outcome": "discarded",
            "seconds": round(self.seconds, 4),
            "tokens": self.tokens,
            "counted": self.counted,
            "finished": self.finished,
        }


class _Held:
    """The state the thread and the task kinds share: the tally, the queue's items, the cost."""

    def __init__(self) -> None:
        self.tally = Tally()
        #: whether the answer was handed over (:meth:`release`)
        self.released = False
        #: what it cost, once discarded
        self.cost: DiscardedCost | None = None

    def _ended(self, error: BaseException | None) -> tuple[str, Any]:
        """The queue's last item, once the answer ran to its end (or raised)."""
        self.tally.ended = time.perf_counter()
        return (_END, None) if error is None else (_ERROR, error)

    @staticmethod
    def _value(item: tuple[str, Any]) -> tuple[bool, Any]:
        """``(more, chunk)`` for a queue item; the answer's own error is raised to the consumer."""
        kind, value = item
        if kind == _ERROR:
            raise value
        return kind == _CHUNK, value

    def _drop(self) -> DiscardedCost:
        """Mark the answer discarded and measure what it cost so far."""
        tally, now = self.tally, time.perf_counter()
        finished = tally.ended is not None
        seconds = (tally.ended if tally.ended is not None else now) - tally.started
        tokens, counted = (tally.tokens, "tokens") if tally.tokens is not None else (tally.chunks, "chunks")
        self.cost = DiscardedCost(seconds, int(tokens), counted, finished)  # type: ignore[arg-type]
        logger.info(
            "discarded a speculative answer after %.2fs (%d %s%s)",
            seconds,
            self.cost.tokens,
            counted,
            "" if finished else ", still running",
        )
        return self.cost

    @staticmethod
    def _single(chunks: list[T]) -> T:
        if len(chunks) != 1:
            raise ConfigurationError(f"a held answer gave {len(chunks)} chunks where one was expected")
        return chunks[0]


class HeldAnswer(_Held, Generic[T]):
    """``produce(tally)``'s chunks made on a daemon thread (in a copy of the caller's context: its
    deadline applies) and held until :meth:`release` or :meth:`discard`."""

    def __init__(self, produce: Callable[[Tally], Iterable[T]], *, name: str = "scopeguard-speculative"):
        super().__init__()
        self._queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._stop = threading.Event()
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._run, produce), name=name, daemon=True)
        self._thread.start()

    def _run(self, produce: Callable[[Tally], Iterable[T]]) -> None:
        error: BaseException | None = None
        try:
            chunks = iter(produce(self.tally))
            try:
                for chunk in chunks:
                    self.tally.chunks += 1
                    if self._stop.is_set():
                        return  # discarded, or its consumer stopped: no more of it is made
                    self._queue.put((_CHUNK, chunk))
            finally:
                close = getattr(chunks, "close", None)
                if callable(close):
                    close()
        except BaseException as exc:  # handed to the consumer, or dropped with the answer
            error = exc
        self._queue.put(self._ended(error))

    def release(self) -> Iterator[T]:
        """The answer's chunks: those held, then the rest as they come (its error is raised)."""
        self.released = True
        return self._chunks()

    def _chunks(self) -> Iterator[T]:
        try:
            while True:
                more, chunk = self._value(self._queue.get())
                if not more:
                    return
                yield chunk
        finally:
            self._stop.set()  # a consumer that stops early stops the answer

    def result(self) -> T:
        """The whole answer of a ``produce`` that gives one chunk (it waits for it)."""
        return self._single(list(self.release()))

    def discard(self) -> DiscardedCost:
        """Stop the answer (at its next chunk) and drop what it made; what it cost so far."""
        self._stop.set()
        return self._drop()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the thread has ended, at most ``timeout`` seconds; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


class AsyncHeldAnswer(_Held, Generic[T]):
    """``produce(tally)``'s chunks made by an asyncio task and held until :meth:`release` or
    :meth:`discard` (which cancels the task). Created inside a running event loop."""

    def __init__(self, produce: Callable[[Tally], AsyncIterable[T]], *, name: str = "scopeguard-speculative"):
        super().__init__()
        self.loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._task = self.loop.create_task(self._run(produce), name=name)
        self._task.add_done_callback(_retrieve)

    async def _run(self, produce: Callable[[Tally], AsyncIterable[T]]) -> None:
        error: BaseException | None = None
        chunks = produce(self.tally)
        try:
            async for chunk in chunks:
                self.tally.chunks += 1
                self._queue.put_nowait((_CHUNK, chunk))
        except Exception as exc:  # handed to the consumer, or dropped with the answer
            error = exc
        finally:
            aclose = getattr(chunks, "aclose", None)
            if callable(aclose):
                await aclose()
        self._queue.put_nowait(self._ended(error))

    def release(self) -> AsyncIterator[T]:
        """The answer's chunks: those held, then the rest as they come (its error is raised)."""
        self.released = True
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[T]:
        try:
            while True:
                more, chunk = self._value(await self._queue.get())
                if not more:
                    return
                yield chunk
        finally:
            self._task.cancel()  # a consumer that stops early stops the answer (a no-op once done)

    async def result(self) -> T:
        """The whole answer of a ``produce`` that gives one chunk (it waits for it)."""
        return self._single([chunk async for chunk in self.release()])

    def discard(self) -> DiscardedCost:
        """Cancel the answer and drop what it made; what it cost so far."""
        cost = self._drop()
        self._task.cancel()
        return cost

    async def stopped(self) -> None:
        """Wait until the task has ended (after :meth:`discard`: its request is closed)."""
        await asyncio.gather(self._task, return_exceptions=True)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Read a finished task's outcome, so that a discarded answer's error is never reported."""
    if not task.cancelled():
        task.exception()


Held = HeldAnswer[str] | AsyncHeldAnswer[str]


def held_responder(held: Held) -> Callable[[str, Sequence[Document]], str]:
    """The responder that hands over ``held``'s answer, for the policies that call a responder
    (``flag``, ``hedge``): they get the speculative answer instead of asking again. An async held
    answer is waited for from the worker thread the async policies call a responder on."""
    if isinstance(held, HeldAnswer):
        return lambda _question, _documents: held.result()
    loop = held.loop

    def wait(_question: str, _documents: Sequence[Document]) -> str:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise ConfigurationError(
                "a policy called the responder on the event loop; call it with asyncio.to_thread"
            )
        return asyncio.run_coroutine_threadsafe(held.result(), loop).result()

    return wait


def speculation_metadata(held: Held | None) -> dict[str, Any]:
    """What a result records about its speculative answer (``{}`` without one): ``released``, or
    the cost of one discarded now (it is, unless it was released)."""
    if held is None:
        return {}
    if held.released:
        return {"speculation": {"outcome": "released"}}
    cost = held.cost if held.cost is not None else held.discard()
    return {"speculation": cost.metadata()}


def _with_metadata(result: GuardResult, extra: dict[str, Any]) -> GuardResult:
    return result.model_copy(update={"metadata": {**result.metadata, **extra}}) if extra else result


def settled(held: Held | None, answer: Callable[[], GuardResult]) -> GuardResult:
    """``answer()``'s result with what became of ``held`` in its metadata (:func:`speculation_metadata`:
    a held answer not released is dropped here, also when ``answer`` raises)."""
    try:
        result = answer()
    finally:
        extra = speculation_metadata(held)
    return _with_metadata(result, extra)


async def asettled(held: Held | None, answer: Awaitable[GuardResult]) -> GuardResult:
    """The async twin of :func:`settled`."""
    try:
        result = await answer
    finally:
        extra = speculation_metadata(held)
    return _with_metadata(result, extra)


class CountingChatModel:
    """A :class:`~scopeguard.llm.base.ChatModel` that passes every call on to ``model`` and adds the
    completion tokens it reports to ``tally`` (a speculative answer's)."""

    def __init__(self, model: ChatModel, tally: Tally) -> None:
        self.model = model
        self.tally = tally

    @property
    def name(self) -> str:
        return self.model.name

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        completion = self.model.complete(prompt, **complete_keywords(sampling))
        if completion.completion_tokens:  # 0: the backend reports none
            self.tally.add_tokens(completion.completion_tokens)
        return completion

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        completion = await self.model.acomplete(prompt, **complete_keywords(sampling))
        if completion.completion_tokens:
            self.tally.add_tokens(completion.completion_tokens)
        return completion


def _counting(llm: ChatModel | None, tally: Tally) -> ChatModel | None:
    """``llm`` counting the tokens it reports into ``tally`` (``None`` stays ``None``)."""
    return None if llm is None else CountingChatModel(llm, tally)


def start_answer(
    llm: ChatModel | None, template: str, q: str, docs: Sequence[Document], responder: Responder | None
) -> HeldAnswer[str]:
    """The guard's answer started on a thread: ``responder``'s, or ``llm``'s with the RAG
    ``template`` (its tokens counted)."""

    def produce(tally: Tally) -> list[str]:
        if responder is not None:
            return [responder(q, docs)]
        return [llm_answer(_counting(llm, tally), q, docs, template)]

    return HeldAnswer(produce)


def astart_answer(
    llm: ChatModel | None, template: str, q: str, docs: Sequence[Document], responder: Responder | None
) -> AsyncHeldAnswer[str]:
    """:func:`start_answer` as a task (``responder`` on a worker thread, as without speculation)."""

    async def produce(tally: Tally) -> AsyncIterator[str]:
        if responder is not None:
            yield await asyncio.to_thread(responder, q, docs)
        else:
            yield await allm_answer(_counting(llm, tally), q, docs, template)

    return AsyncHeldAnswer(produce)
