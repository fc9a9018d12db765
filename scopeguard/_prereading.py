"""Pre-reading in the background: a daemon thread that reads one document at a time, between checks.

A :class:`PrereadJob` (from :meth:`scopeguard.Guard.preread_in_background`, or ``scopeguard serve
--preread CORPUS``) hands its documents one by one to a read function (the guard's detector's
``preread``). The reading model serialises its own calls (the llama.cpp scorer's lock, the server's
reading queue), one passage at a time, so a check and a pre-read never read at once; the
:class:`CheckGate` also holds the job back while any check of the guard is running, so a check
waits at most for the one document being read when it arrived, never for the rest of the batch.

The job never raises into the process that started it: an error stops it, is kept as
:attr:`PrereadJob.error` and logged.

What a pre-read cost comes back as a :class:`PrereadReport` (``Guard.preread``'s return, a
finished job's :attr:`PrereadJob.report`): the passages kept, the documents, the wall time, and
the bytes the kept states added on disk (the growth of the reader's state folder, measured by
:func:`saved_state_bytes` before and after).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from scopeguard.detection.detectors.base import Prereader
from scopeguard.types import Document, as_documents

__all__ = [
    "CheckGate",
    "PrereadJob",
    "PrereadReport",
    "Prereading",
    "kept_state_stats",
    "measured",
    "preread_documents",
    "saved_state_bytes",
]

logger = logging.getLogger(__name__)

_POLL_S = 0.1  # how often a job held back by checks looks whether it was cancelled


def preread_documents(documents: str | Document | Iterable[str | Document]) -> tuple[Document, ...]:
    """``documents`` to pre-read as records; none is allowed (an empty text is an ``InputError``)."""
    items = [documents] if isinstance(documents, (str, Document)) else list(documents)
    return as_documents(items) if items else ()


def kept_state_stats(detector: Any) -> Any:
    """The reading detector's kept-state figures (its scorer's ``state_stats()``: a llama.cpp
    reader's), or ``None`` for a detector or scorer that keeps no states."""
    scorer = getattr(getattr(detector, "reader", None), "scorer", None)
    stats = getattr(scorer, "state_stats", None)
    return stats() if callable(stats) else None


def saved_state_bytes(detector: Any) -> int:
    """The bytes of the state files in ``detector``'s state folder (a scan of the folder), 0 for a
    detector that keeps no states on disk."""
    saved = getattr(kept_state_stats(detector), "saved", None)
    return int(saved.bytes) if saved is not None else 0


def _size(n: int) -> str:
    """``n`` bytes in decimal units: ``"1.2 GB"``, ``"340 kB"``, ``"0 B"``."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n} B"


@dataclass(frozen=True, eq=False)
class PrereadReport:
    """What a pre-read cost: the ``passages`` whose state is kept, of ``documents``, in ``seconds``
    of wall time, and the ``bytes_on_disk`` the kept states added (0 for a detector that keeps
    nothing on disk). It compares and converts like the passage count (``int(report)``,
    ``report == 3``, ``bool(report)``); :meth:`summary` is one line for a log."""

    passages: int
    documents: int
    seconds: float
    bytes_on_disk: int = 0

    def summary(self) -> str:
        """``"pre-read 120 passages of 120 documents in 341 s; 1.2 GB of states on disk"``."""
        took = f"{self.seconds:.0f}" if self.seconds >= 10 else f"{self.seconds:.1f}"
        return (
            f"pre-read {self.passages} passages of {self.documents} documents in {took} s; "
            f"{_size(self.bytes_on_disk)} of states on disk"
        )

    def __int__(self) -> int:
        return self.passages

    def __index__(self) -> int:
        return self.passages

    def __bool__(self) -> bool:
        return bool(self.passages)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PrereadReport):
            fields = (self.passages, self.documents, self.seconds, self.bytes_on_disk)
            return fields == (other.passages, other.documents, other.seconds, other.bytes_on_disk)
        if isinstance(other, int):
            return self.passages == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.passages)  # equal to its passage count, so hashed as it


def measured(read: Callable[[], int], documents: int, disk_bytes: Callable[[], int] | None) -> PrereadReport:
    """Run ``read()`` (a pre-read of ``documents`` documents returning the passages kept) and report
    what it cost: its wall time and the growth of ``disk_bytes()`` (``None``: nothing on disk)."""
    started = time.perf_counter()
    before = disk_bytes() if disk_bytes is not None else 0
    passages = read()
    after = disk_bytes() if disk_bytes is not None else 0
    return PrereadReport(
        passages=passages,
        documents=documents,
        seconds=time.perf_counter() - started,
        bytes_on_disk=max(0, after - before),  # never negative when old states were evicted meanwhile
    )


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
    far; once :meth:`done`, :attr:`result` is the passages read and :attr:`report` what the job
    cost (a :class:`PrereadReport`, logged at INFO; both ``None`` after an error or a
    :meth:`cancel`, with :attr:`error` or :attr:`cancelled` saying which). ``disk_bytes()``, when
    given, measures the state folder (:func:`saved_state_bytes`) before and after the job.
    """

    def __init__(
        self,
        read: Callable[[Document], int],
        documents: Sequence[Document],
        *,
        gate: CheckGate | None = None,
        disk_bytes: Callable[[], int] | None = None,
        name: str = "scopeguard-preread",
    ) -> None:
        self._read_one = read
        self._documents = tuple(documents)
        self._gate = gate
        self._disk_bytes = disk_bytes
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
        #: what the job cost, once it has read every document
        self.report: PrereadReport | None = None
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
            report = measured(self._read_all, self.total, self._disk_bytes)
            if self.read < self.total:  # cancelled: no report of a part
                return
            self.result, self.report = self.passages, report
            logger.info("%s", report.summary())
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

    def _read_all(self) -> int:
        """Read the documents in turn, each once no check is running; the passages read."""
        for doc in self._documents:
            if self._gate is not None:
                self._gate.wait_idle(self._stop)  # checks first: never a whole batch ahead of one
            if self._stop.is_set():
                logger.info("pre-read cancelled after %d of %d documents", self.read, self.total)
                return self.passages
            self.passages += int(self._read_one(doc))
            self.read += 1
        return self.passages

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


Docs = str | Document | Iterable[str | Document]

# the guard's own messages, under its name, wherever its methods are written
_guard_logger = logging.getLogger("scopeguard.guard")


class Prereading:
    """:class:`~scopeguard.Guard`'s pre-reading: its ``detector`` reads documents ahead of the
    questions, in the foreground or in a background job held back by its ``gate``."""

    detector: Any
    gate: CheckGate

    def preread(self, documents: Docs, *, progress: bool | None = None) -> PrereadReport:
        """Have the detector read ``documents`` ahead of the questions and keep its state after each
        (a :class:`~scopeguard.detection.detectors.Prereader`: ``default`` and ``logprob`` with
        llama.cpp keep it on disk, under ``$SCOPEGUARD_CACHE/llama-states``), so that a later check
        about one costs only the question's tokens. Returns what it cost, a
        :class:`~scopeguard.PrereadReport` (logged at INFO): the passages whose state is kept (it
        compares and converts like that count; a detector that does not pre-read reads nothing:
        0), the documents, the wall time and the bytes the states added on disk. ``progress``: a
        progress bar (``None``: on a terminal). No deadline applies: it is not a request."""
        docs = preread_documents(documents)
        report = measured(lambda: self._read_ahead(docs, progress=progress), len(docs), self._disk_bytes)
        _guard_logger.info("%s", report.summary())
        return report

    async def apreread(self, documents: Docs, *, progress: bool | None = None) -> PrereadReport:
        """:meth:`preread` on a worker thread."""
        return await asyncio.to_thread(self.preread, documents, progress=progress)

    def preread_in_background(self, documents: Docs) -> PrereadJob:
        """:meth:`preread` on a daemon thread, one document at a time, each only while no check of
        this guard is running: a check waits at most for the one document being read when it came.
        Returns at once; the :class:`~scopeguard.PrereadJob` says how far it got (``read`` of
        ``total``), ``wait(timeout)``, ``cancel()`` stops it between documents, an error stops it
        and is kept as ``job.error`` (logged, never raised), and once done ``job.report`` is the
        :class:`~scopeguard.PrereadReport` of the whole job (its summary logged at INFO)."""
        docs = preread_documents(documents) if self._prereader() is not None else ()
        return PrereadJob(
            lambda doc: self._read_ahead([doc], progress=False),
            docs,
            gate=self.gate,
            disk_bytes=self._disk_bytes,
        )

    def _disk_bytes(self) -> int:
        """The bytes in the detector's state folder (0 when it keeps none on disk)."""
        return saved_state_bytes(self.detector)

    def _read_ahead(self, docs: Sequence[Document], *, progress: bool | None) -> int:
        """The detector's pre-read of ``docs``: the passages whose state it kept (0 when it does not
        pre-read)."""
        prereader = self._prereader() if docs else None
        return 0 if prereader is None else int(prereader.preread(docs, progress=progress))

    def _prereader(self) -> Prereader | None:
        """The detector, when it pre-reads (else ``None``, logged at debug level)."""
        if isinstance(self.detector, Prereader):
            return self.detector
        _guard_logger.debug(
            "detector %s does not pre-read: nothing read ahead", getattr(self.detector, "name", "?")
        )
        return None
