"""One warm process: the guard built once, the reading model behind one queue, admission control.

Checks run on a pool of ``workers`` threads, so ``fast``/``lexical`` checks run side by side; a
detector that reads (its registry entry says so: ``default``, ``logprob``) gets its verdict scorer
(``reader``, or the one it builds for itself) wrapped in :class:`SerialScorer`, which hands every
call to one reading thread (llama.cpp is not re-entrant) and gives up on a queued call once the
request's deadline has passed. Documents are read once: the scorer keeps each passage's state (see
:meth:`LogProbDetector.preread`) and the server remembers which documents it has pre-read. A corpus
given at start (``--preread``) is pre-read in the background through the same queue, one document
at a time and only while no check is running (:mod:`scopeguard.serve._preread`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from scopeguard._prereading import kept_state_stats, saved_state_bytes
from scopeguard._speculation import DiscardedCost
from scopeguard.detection.detectors.base import Detector
from scopeguard.detection.detectors.registry import detector_options, detector_reads, get_detector
from scopeguard.errors import ConfigurationError, LLMTimeoutError
from scopeguard.guard import Guard
from scopeguard.llm.deadline import current as current_budget
from scopeguard.llm.deadline import deadline as deadline_block
from scopeguard.serve._admission import Admission, Rejected
from scopeguard.serve._backlog import Backlog
from scopeguard.serve._config import ServeConfig
from scopeguard.serve._metrics import Metrics
from scopeguard.serve._preread import StartupPreread
from scopeguard.serve._telemetry import set_attributes, span, trace_discarded
from scopeguard.types import Document, GuardResult, Verdict

logger = logging.getLogger(__name__)
T = TypeVar("T")

_SEEN_LIMIT = 100_000  # documents remembered as checked (their hashes), for the kind of work

#: the warm-up check's document: a retrieved passage of a typical length (about 200 words), so that
#: the admission's prior for a new document is what reading one costs (a request's new documents
#: count in units of its length: :meth:`Runtime.new_units`)
WARMUP_DOCUMENT = " ".join(
    [
        "The harbour board met on Tuesday to review the spring timetable for the island ferries.",
        "Two crossings a day will run from April, rising to four in the summer months, and the",
        "early sailing on Sundays returns after a year's absence. The board said the new vessel,",
        "built at a yard on the east coast, passed its sea trials in February and will enter",
        "service once the crew have finished their training. Ticket prices stay as they were for",
        "residents, while visitors will pay a small surcharge in the busiest weeks. The pier at",
        "the northern landing is being strengthened, so some sailings may leave from the old",
        "quay until the work ends. Passengers with bicycles are asked to book ahead, because",
        "space on the car deck is limited, and the café on board will open on the longer routes.",
        "A public meeting on the winter service is planned for the autumn, when the board will",
        "publish the figures for this year's passenger numbers and the cost of the new vessel.",
    ]
)


# as long as the warm-up document, not read before the second warm-up check
_WARMUP_OTHER = " ".join(reversed(WARMUP_DOCUMENT.split(". ")))
_WARMUP_QUESTIONS = ("When does the early Sunday sailing return?", "How many crossings run in summer?")


def _text_units(documents: Sequence[Document]) -> int:
    return max(1, math.ceil(sum(len(d.text) for d in documents) / len(WARMUP_DOCUMENT)))


class ReadingLane:
    """One thread for the reading model; a queued call gives up when its deadline passes."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="scopeguard-reading")
        self._metrics = metrics
        self._lock = threading.Lock()
        self.depth = 0

    def _moved(self, by: int) -> None:
        with self._lock:
            self.depth += by
            if self._metrics is not None:
                self._metrics.reading_queue.set(self.depth)

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        budget = current_budget()
        ctx = contextvars.copy_context()  # the deadline (and span) follow the call
        self._moved(+1)
        try:
            future = self._pool.submit(ctx.run, _traced_read, fn, time.perf_counter(), *args, **kwargs)
            timeout = None if budget is None else max(budget.remaining(), 0.0)
            try:
                return future.result(timeout=timeout)
            except concurrent.futures.TimeoutError:
                future.cancel()
                seconds = budget.seconds if budget is not None else 0.0
                raise LLMTimeoutError(
                    f"the reading model's queue ran past the deadline of {seconds:g}s", deadline=seconds
                ) from None
        finally:
            self._moved(-1)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _traced_read(fn: Callable[..., T], queued_at: float, *args: Any, **kwargs: Any) -> T:
    """``fn`` in a ``scopeguard.read`` span (the reading stage), with the time it waited."""
    waited_ms = round((time.perf_counter() - queued_at) * 1000, 1)
    with span("scopeguard.read", call=getattr(fn, "__name__", "?"), queued_ms=waited_ms):
        return fn(*args, **kwargs)


class SerialScorer:
    """A :class:`~scopeguard.detection.read.VerdictScorer` whose every call goes through a
    :class:`ReadingLane` (``prime`` and ``load`` too, when the wrapped scorer has them)."""

    def __init__(self, scorer: Any, lane: ReadingLane) -> None:
        self.scorer = scorer
        self.lane = lane

    @property
    def name(self) -> str:
        return str(self.scorer.name)

    def score(self, messages: Any) -> Any:
        return self.lane.run(self.scorer.score, messages)

    def score_many(self, *args: Any, **kwargs: Any) -> Any:
        return self.lane.run(self.scorer.score_many, *args, **kwargs)

    def count_tokens(self, text: str) -> int:
        return int(self.lane.run(self.scorer.count_tokens, text))

    def __getattr__(self, attr: str) -> Any:
        if attr in ("prime", "load", "score_set"):  # optional abilities: only when the scorer has them
            method = getattr(self.scorer, attr)
            return lambda *a, **k: self.lane.run(method, *a, **k)
        if attr in ("kv_type", "state_stats", "state_dir"):  # what it keeps: read beside the lane
            return getattr(self.scorer, attr)
        raise AttributeError(attr)


def build_detector(config: ServeConfig, lane: ReadingLane) -> Detector:
    """The configured detector, given ``config.reader``; one that reads does it through ``lane``:
    the scorer it builds from its reading model (a spec: default's reads its head's layers too) is
    wrapped in :class:`SerialScorer`."""
    if config.reader is None and config.read is None and not detector_reads(config.detector):
        return get_detector(config.detector)
    options = detector_options(config.detector, reader=config.reader, read=config.read)
    detector = get_detector(config.detector, **options)  # a reader refused by one that does not read
    reader = getattr(detector, "reader", None)  # a reading detector's Reader
    if getattr(reader, "scorer", None) is None:
        raise ConfigurationError(
            f"detector {config.detector!r} reads, but has no reader.scorer to put behind the reading queue"
        )
    reader.scorer = SerialScorer(reader.scorer, lane)  # type: ignore[union-attr]
    return detector


def build_upstream(config: ServeConfig) -> Any:
    """The upstream LLM as scopeguard's OpenAI-compatible chat model (its retries, deadline and
    typed errors), or ``None`` without ``upstream``."""
    if config.upstream is None:
        return None
    from scopeguard.llm.openai_compat import OpenAIChatModel

    key = config.upstream_api_key.get_secret_value() if config.upstream_api_key else None
    return OpenAIChatModel(
        config.upstream_model or "default", base_url=config.upstream, api_key=key, timeout=config.deadline
    )


@dataclass(frozen=True)
class Timed:
    """A step's value and whether the request's deadline ran out during it."""

    value: Any
    timed_out: bool


def _caller_answers(question: str, documents: Sequence[Document]) -> str:
    return ""  # no answering LLM, or the caller asked for the verdict only: the caller answers


class Runtime:
    """The server's state: config, guard, reading lane, metrics, admission and the pre-read store."""

    def __init__(self, config: ServeConfig, *, detector: Detector | None = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.lane = ReadingLane(self.metrics)
        self.upstream = build_upstream(config)
        self.guard = Guard(
            detector=detector if detector is not None else build_detector(config, self.lane),
            policy=config.policy,
            llm=self.upstream,
            on_error=config.on_error,
            deadline=config.deadline,
            calibration=config.calibration,
        )
        self.ready = False
        self.load_error: str | None = None
        self.admission = Admission(config.deadline, config.queue_size, headroom=config.admission_headroom)
        self.backlog: Backlog | None = None  # the HTTP stack's unread requests, where it says
        self.active = 0  # HTTP requests inside the app (counted by the middleware, on the loop)
        self._seen: OrderedDict[str, None] = OrderedDict()  # documents checked before (newest last)
        self._seen_lock = threading.Lock()
        self._reading: Counter[str] = Counter()  # documents an admitted request is reading now
        self.preread_hashes: set[str] = set()
        self._preread_lock = threading.Lock()
        self.startup_preread = StartupPreread(config.preread, self.metrics)
        self.metrics.watch_states(lambda: kept_state_stats(self.guard.detector))
        self.executor = concurrent.futures.ThreadPoolExecutor(config.workers, thread_name_prefix="scopeguard")

    @property
    def detector_name(self) -> str:
        return str(getattr(self.guard.detector, "name", "?"))

    def load(self) -> None:
        """Load the detector's models now (a warm-up check, then ``load()`` where there is one)."""
        try:
            with span("scopeguard.load", detector=self.detector_name):
                if self.config.preload:
                    detect = self.guard.detector.detect
                    detect("Is this a warm-up question?", [WARMUP_DOCUMENT])  # loads the models
                    loader = getattr(self.guard.detector, "load", None)
                    if callable(loader):
                        loader()
                    # the priors until measured: a new document's read, then the same one known
                    # (the first check's time is mostly loading, far above either)
                    # (another question the second time: the same one again may be a cached verdict)
                    for kind, question in (("new", _WARMUP_QUESTIONS[0]), ("known", _WARMUP_QUESTIONS[1])):
                        started = time.perf_counter()
                        detect(question, [_WARMUP_OTHER])
                        self.admission.seed(kind, time.perf_counter() - started)
            self.ready = True
            logger.info("models loaded", extra={"detector": self.detector_name})
        except Exception as exc:  # reported by /readyz; requests still try (and fail closed)
            self.load_error = f"{type(exc).__name__}: {exc}"
            logger.error("loading the detector failed: %s", self.load_error)

    def start(self) -> None:
        """What the server does at start, on a worker: :meth:`load`, then the ``--preread`` corpus in
        the background (after the warm-up checks, whose times are admission's priors), through
        :meth:`preread` (its documents count as pre-read here), each only while no check runs."""
        self.load()
        self.startup_preread.start(
            lambda doc: self.preread([doc])[2],
            self.guard.gate,
            disk_bytes=lambda: saved_state_bytes(self.guard.detector),
        )

    def _unread(self, documents: Sequence[Document], hashes: Sequence[str]) -> list[Document]:
        """The documents (``hashes``: their content hashes) neither checked here before (their
        states kept) nor being read now by a request admitted earlier (a burst about one new
        document pays its read once)."""
        with self._seen_lock:
            seen, reading = self._seen, self._reading
            return [d for d, h in zip(documents, hashes, strict=True) if h not in seen and h not in reading]

    def new_units(self, documents: Sequence[Document]) -> int:
        """The documents not read here yet, in warm-up documents' worth of text (at least 1): a
        new document's read costs about its length, and the ``new`` estimate is one warm-up's."""
        return _text_units(self._unread(documents, [d.content_hash for d in documents]))

    def _read_done(self, hashes: Sequence[str]) -> None:
        """The documents of ``hashes`` are read: no longer being read by this request, and known."""
        with self._seen_lock:
            for h in hashes:
                if self._reading[h] > 1:
                    self._reading[h] -= 1
                else:
                    del self._reading[h]
                self._seen[h] = None
                self._seen.move_to_end(h)
            while len(self._seen) > _SEEN_LIMIT:
                self._seen.popitem(last=False)

    @contextmanager
    def admit(
        self, documents: Sequence[Document] = (), *, kind: str | None = None, units: int = 1
    ) -> Iterator[None]:
        """Admission for one request about ``documents`` (see :mod:`scopeguard.serve._admission`),
        or :class:`~scopeguard.serve._admission.Rejected` (the server answers 429 at once)."""
        hashes = [d.content_hash for d in documents]  # once per request: each is a SHA-256 of the text
        if kind is None:  # "known" when every document was checked here before or is being read, else "new"
            unread = self._unread(documents, hashes)
            kind = "new" if unread else "known"
            # each item a unit at least, the text its warm-up documents' worth: the new text for a
            # new read, all of it for a known one (a check costs more on a longer document too)
            units = max(units, _text_units(unread if unread else documents))
        try:
            ticket = self.admission.admit(kind, units)
        except Rejected as exc:
            self.metrics.rejected.labels(exc.reason).inc()
            raise
        with self._seen_lock:
            self._reading.update(hashes)
        self.metrics.in_flight.set(self.admission.in_flight)
        try:
            yield
        finally:
            self.admission.done(ticket)
            self._read_done(hashes)
            self.metrics.in_flight.set(self.admission.in_flight)
            self.metrics.admission_estimate.labels(kind).set(self.admission.estimate(kind))

    def attach(self, backlog: Backlog) -> None:
        """Count ``backlog`` (the HTTP server's unread requests) in admission: set by
        :func:`scopeguard.serve.run` under uvicorn."""
        self.backlog = backlog
        self.admission.unread = backlog.seconds

    async def watch_loop(self, interval: float = 0.05) -> None:
        """Measure the event loop's lag for admission, until cancelled: how late a ``interval``
        timer wakes is about how long a request arriving now waits before its handler runs. With a
        :attr:`backlog`, each tick also times how fast the loop drains its unread requests."""
        loop = asyncio.get_running_loop()
        while True:
            planned = loop.time() + interval
            await asyncio.sleep(interval)
            self.admission.lag = lag = max(0.0, loop.time() - planned)
            self.metrics.loop_lag.set(lag)
            if self.backlog is not None:
                self.backlog.sample(loop.time())
                self.metrics.unread.set(self.backlog.waiting)

    def _fail_closed(self, verdict: Verdict, timed_out: bool) -> None:
        if verdict.label == "unknown":
            self.metrics.fail_closed.labels("deadline" if timed_out else "detector").inc()

    async def check(self, question: str, documents: Sequence[Document]) -> Timed:
        with deadline_block(self.config.deadline), span("scopeguard.check") as s:
            verdict = await self.guard.acheck(question, documents)
            timed_out = verdict.label == "unknown" and verdict.error_kind == "timeout"
            set_attributes(s, label=verdict.label, stage=verdict.stage, detector=verdict.detector)
        self.metrics.verdict(verdict)
        self._fail_closed(verdict, timed_out)
        return Timed(verdict, timed_out)

    async def answer(self, question: str, documents: Sequence[Document], *, generate: bool) -> Timed:
        own = generate and self.guard.llm is not None
        with deadline_block(self.config.deadline), span("scopeguard.answer") as s:
            result: GuardResult = await self.guard.aanswer(
                question,
                documents,
                responder=None if own else _caller_answers,
                speculative=own and self.config.speculative,
            )
            set_attributes(s, label=result.verdict.label, action=result.action.value)
            if "speculation" in result.metadata:
                self.speculated("answer", DiscardedCost.from_metadata(result.metadata["speculation"]))
        if not own and result.response == "":
            result = result.model_copy(update={"response": None})
        self.metrics.verdict(result.verdict)
        kinds = {result.verdict.error_kind, result.metadata.get("error_kind")}
        timed_out = result.failed_closed and "timeout" in kinds
        if result.failed_closed:
            self.metrics.fail_closed.labels("deadline" if timed_out else "error").inc()
        return Timed(result, timed_out)

    def speculated(self, route: str, cost: DiscardedCost | None) -> None:
        """Count a speculative answer of ``route`` in the metrics: released (``cost`` ``None``) or
        discarded (also traced, with what it cost)."""
        self.metrics.speculation(route, cost)
        if cost is not None:
            trace_discarded(cost)

    def preread(self, documents: Sequence[Document]) -> tuple[int, int, int]:
        """``(documents read now, documents already kept, passages read)``; documents the server
        has pre-read before are skipped, so identical documents are read once."""
        fresh = []
        with self._preread_lock:
            for doc in documents:
                if doc.content_hash not in self.preread_hashes:
                    self.preread_hashes.add(doc.content_hash)
                    fresh.append(doc)
        reader = getattr(self.guard.detector, "preread", None)
        passages = 0
        if fresh and callable(reader):
            with span("scopeguard.preread", documents=len(fresh)):
                try:
                    passages = int(reader(fresh, progress=False))
                except BaseException:
                    with self._preread_lock:
                        self.preread_hashes.difference_update(d.content_hash for d in fresh)
                    raise
        return len(fresh), len(documents) - len(fresh), passages

    def close(self) -> None:
        self.startup_preread.cancel()
        self.lane.close()
        self.executor.shutdown(wait=False, cancel_futures=True)
