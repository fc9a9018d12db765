"""Pre-reading in the background: a daemon thread that reads one document at a time, between checks.

A :class:`PrereadJob` (from :meth:`scopeguard.Guard.preread_in_background`, or ``scopeguard serve
--preread CORPUS``) hands its documents one by one to a read function (the guard's detector's
``preread``). The reading model serialises its own calls (the llama.cpp scorer's lock, the server's
reading queue), one passage at a time, so a check and a pre-read never read at once; the
:class:`CheckGate` also holds the job back while any check of the guard is running, so a check
waits at most for the one document being read when it arrived, never for the rest of the batch.

The job never raises into the process that started it: an error stops it, is kept as
:attr:`PrereadJob.error` and logged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from scopeguard.types import Document, as_documents

__all__ = ["CheckGate", "PrereadJob", "preread_documents"]

logger = logging.getLogger(__name__)

_POLL_S = 0.1  # how often a job held back by checks looks whether it was cancelled


def preread_documents(documents: str | Document | Iterable[str | Document]) -> tuple[Document, ...]:
    """``documents`` to pre-read as records; none is allowed (an empty text is an ``InputError``)."""
    items = [documents] if isinstance(documents, (str, Document)) else list(documents)
    return as_documents(items) if items else ()


class CheckGate:
    """Counts the checks running; a background pre-read reads its next document only when none is."""

    def __init__(self) -> None:
        self._idle = threading.Condition()
        self._running = 0

    @contextmanager
    def checking(self) -> Iterator[None]:
        """Held for the time of one check (sync or async: the lock is only taken to count)."""
        with self._idle:
            self._running += 1
        try:
            yield
        finally:
            with self._idle:
                self._running -= 1
                if self._running == 0:
                    self._idle.notify_all()

    @property
    def running(self) -> int:
        """How many checks are running now."""
        return self._running

    def wait_idle(self, stop: threading.Event) -> None:
        """Return once no check is running (or ``stop`` is set)."""
        with self._idle:
            while self._running and not stop.is_set():
                self._idle.wait(_POLL_S)


class PrereadJob:
    """Documents pre-read on a daemon thread, one at a time (see the module docstring).

    Started by :meth:`scopeguard.Guard.preread_in_background`; ``read(document)`` pre-reads one
    document and returns the passages it read. :attr:`read` of :attr:`total` documents are done so
    far; once :meth:`done`, :attr:`result` is the passages read (``None`` after an error or a
    :meth:`cancel`, with :attr:`error` or :attr:`cancelled` saying which).
    """

    def __init__(
        self,
        read: Callable[[Document], int],
        documents: Sequence[Document],
        *,
        gate: CheckGate | None = None,
        name: str = "scopeguard-preread",
    ) -> None:
        self._read_one = read
        self._documents = tuple(documents)
        self._gate = gate
        self._stop = threading.Event()
        self._finished = threading.Event()
        #: documents in the job
        self.total = len(self._documents)
        #: documents pre-read so far
        self.read = 0
        #: passages read so far
        self.passages = 0
        #: the passages read, once the job has read every document
        self.result: int | None = None
        #: the error that stopped the job (kept here and logged, never raised)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        if not self.done():
            state = "running"
        else:
            state = "failed" if self.error else "cancelled" if self.result is None else "done"
        return f"PrereadJob({self.read}/{self.total} documents, {state})"

    def _run(self) -> None:
        try:
            for doc in self._documents:
                if self._gate is not None:
                    self._gate.wait_idle(self._stop)  # checks first: never a whole batch ahead of one
                if self._stop.is_set():
                    logger.info("pre-read cancelled after %d of %d documents", self.read, self.total)
                    return
                self.passages += int(self._read_one(doc))
                self.read += 1
            self.result = self.passages
            logger.info("pre-read %d passages of %d documents", self.passages, self.total)
        except BaseException as exc:  # kept on the job: a background job never raises into the process
            self.error = exc
            logger.error(
                "pre-read stopped after %d of %d documents: %s: %s",
                self.read,
                self.total,
                type(exc).__name__,
                exc,
            )
        finally:
            self._finished.set()

    def done(self) -> bool:
        """Whether the job has ended (every document read, an error, or cancelled)."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the job to end, at most ``timeout`` seconds; whether it has ended."""
        return self._finished.wait(timeout)

    def cancel(self) -> None:
        """Stop before the next document (the one being read now is finished first)."""
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._stop.is_set()
