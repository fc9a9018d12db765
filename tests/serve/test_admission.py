"""Deadline-aware admission: the rule alone, then a burst against a real server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from scopeguard.serve._admission import Admission, Rejected


def test_requests_are_admitted_while_their_expected_finish_fits_the_deadline() -> None:
    gate = Admission(deadline=1.0, queue_size=100, headroom=0.8)
    gate.seed("new", 0.1)
    tickets = [gate.admit("new") for _ in range(8)]  # 0.8 s of work: just fits 0.8 x 1 s
    assert gate.pending == pytest.approx(0.8)
    with pytest.raises(Rejected) as busy:
        gate.admit("new")
    assert busy.value.reason == "deadline" and busy.value.retry_after == 1
    # a known kind with its own, cheaper estimate still fits where a new document does not
    gate.cost["known"] = 0.0
    gate.done(gate.admit("known"))
    for t in tickets:
        gate.done(t)
    assert gate.in_flight == 0 and gate.pending == 0.0
    # the completions corrected the estimate: eight finished within a few ms of each other
    assert gate.estimate("new") < 0.1


def test_the_event_loops_lag_counts_as_time_already_spent() -> None:
    gate = Admission(deadline=1.0, queue_size=100, headroom=0.8)
    gate.seed("known", 0.1)
    gate.lag = 0.5  # the loop is behind: a request arriving now waits that long to be read
    tickets = [gate.admit("known") for _ in range(3)]  # 0.5 + 0.3 s: just fits 0.8 x 1 s
    with pytest.raises(Rejected) as busy:
        gate.admit("known")
    assert busy.value.reason == "deadline" and busy.value.retry_after == 1
    for t in tickets:
        gate.done(t)
    gate.lag = 0.7
    gate.done(gate.admit("known"))  # alone and the lag under the line: it runs
    gate.lag = 0.9
    assert gate.precheck() is not None  # behind by more than the line: refused even alone
    with pytest.raises(Rejected):
        gate.admit("known")


def test_the_loop_watcher_measures_a_blocked_loop() -> None:
    pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
    pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
    from scopeguard.serve import ServeConfig
    from scopeguard.serve._runtime import Runtime

    runtime = Runtime(ServeConfig(detector="lexical", port=0, deadline=10.0))

    async def block_then_look() -> tuple[float, float, float]:
        watcher = asyncio.create_task(runtime.watch_loop(interval=0.01))
        await asyncio.sleep(0.05)
        quiet = runtime.admission.lag
        time.sleep(0.3)  # the loop is blocked: the watcher's timer wakes late
        for _ in range(3):  # a few turns of the loop: the overdue watcher runs
            await asyncio.sleep(0)
        blocked = runtime.admission.lag
        await asyncio.sleep(0.05)  # caught up: the next timers wake on time
        watcher.cancel()
        return quiet, blocked, runtime.admission.lag

    quiet, blocked, after = asyncio.run(block_then_look())
    assert quiet < 0.1 and 0.2 < blocked < 2.0 and after < 0.1
    runtime.close()


def test_the_queue_size_is_the_last_guard_and_a_lone_request_always_runs() -> None:
    gate = Admission(deadline=1.0, queue_size=2)
    gate.seed("new", 5.0)  # longer than the deadline: alone, it still runs (and may time out)
    first = gate.admit("new")
    with pytest.raises(Rejected, match=r"about 10\.0s") as over:
        gate.admit("new")
    assert over.value.reason == "deadline" and over.value.retry_after == 10  # ceil(10 s - 0.8 s allowed)
    unlimited = Admission(deadline=None, queue_size=2)
    unlimited.admit("new"), unlimited.admit("new")
    with pytest.raises(Rejected) as full:
        unlimited.admit("new")
    assert full.value.reason == "queue_full"
    gate.done(first)


def test_a_request_costs_its_documents_length_in_warm_up_documents_of_its_kind() -> None:
    pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
    pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
    from scopeguard.serve import ServeConfig
    from scopeguard.serve._runtime import WARMUP_DOCUMENT, Runtime
    from scopeguard.types import Document

    runtime = Runtime(ServeConfig(detector="lexical", port=0, deadline=100.0))
    runtime.admission.seed("new", 1.0)  # one warm-up document's read
    runtime.admission.cost["known"] = 0.25
    long = Document(text=WARMUP_DOCUMENT * 3)
    assert runtime.new_units([Document(text="A short note.")]) == 1
    assert runtime.new_units([long]) == 3
    with runtime.admit([long]):
        assert runtime.admission.pending == pytest.approx(3.0)  # three warm-ups' worth of reading
    runtime.admission.cost.update(new=1.0, known=0.25)  # as before (each completion moves them)
    with runtime.admit([long]):  # read once already: a known document, three known checks' worth
        assert runtime.admission.pending == pytest.approx(0.75)
    other = Document(text=WARMUP_DOCUMENT * 2 + " Another one.")
    runtime.admission.cost.update(new=1.0, known=0.25)
    # a burst about one new document pays its read once
    with runtime.admit([other]), runtime.admit([other]), runtime.admit([other]):
        assert runtime.admission.pending == pytest.approx(3.0 + 0.75 + 0.75)
    assert not runtime._reading  # none left counted as being read
    runtime.admission.cost.update(new=1.0, known=0.25)
    with runtime.admit([other]):
        assert runtime.admission.pending == pytest.approx(0.75)


def test_the_warm_up_seeds_both_kinds_from_reads_after_the_models_load() -> None:
    pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
    pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
    from scopeguard.serve import ServeConfig
    from scopeguard.serve._runtime import Runtime
    from scopeguard.testing import ScriptedDetector

    class Slow(ScriptedDetector):
        """Loading 0.6 s, a new document's read 0.2 s, a known one 0.05 s, a question asked of
        the same document again nothing (its verdict cached)."""

        def detect(self, question, documents):  # type: ignore[no-untyped-def]
            texts = [getattr(d, "text", d) for d in documents]
            if (question, texts[0]) not in asked:
                time.sleep(0.6 if not read else 0.05 if texts[0] in read else 0.2)
            read.update(texts)
            asked.add((question, texts[0]))
            return super().detect(question, documents)

    read: set[str] = set()
    asked: set[tuple[str, str]] = set()

    detector = Slow(lambda q: 0.1)
    runtime = Runtime(ServeConfig(detector="lexical", port=0, deadline=30.0), detector=detector)
    runtime.load()
    assert runtime.ready
    assert 0.15 < runtime.admission.estimate("new") < 0.5  # not the load's 0.6 s
    known = runtime.admission.estimate("known")
    assert 0.04 < known < runtime.admission.estimate("new")  # another question, not a cached verdict


# The server and its load generator run in a fresh interpreter: in the suite's process, after a
# thousand tests have loaded models, 3 admitted checks of a burst once ran past the deadline (504,
# failed closed), most likely held up by a stall of the shared GIL (a full garbage collection of that
# heap, say) that the rule cannot foresee. A fresh process has the heap `scopeguard serve` starts with.
# The burst is 150 requests, about ten times what the deadline admits: with 300, on an Intel Xeon
# (2 cores) the load generator's own 300 connections, sharing the server's event loop and GIL, held
# an admitted check's reply past the deadline in 11 of 33 runs (0 of 18 with 150; 13-17 admitted).
_BURST = """
import asyncio, json, time

import httpx

from scopeguard.serve import ServeConfig
from scopeguard.testing import ScriptedDetector, running_guard_server


def slow(question):  # 50 ms of waiting per check, 4 workers: at most 80 checks/s
    time.sleep(0.05)
    return "in_scope"


# the load generator shares this process (and its GIL) with the server: a wider margin
config = ServeConfig(detector="lexical", port=0, workers=4, deadline=2.0, admission_headroom=0.5)
with running_guard_server(config, detector=ScriptedDetector(slow)) as url:

    async def burst(n):
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:

            async def one(i):
                body = {"question": f"Question {i}?", "documents": [f"Document {i % 7}."]}
                r = await client.post(f"{url}/v1/check", json=body)
                return r.status_code, r.json(), r.headers.get("retry-after")

            return await asyncio.gather(*(one(i) for i in range(n)))

    replies = asyncio.run(burst(150))
    metrics = httpx.get(f"{url}/metrics").text
print(json.dumps({"replies": replies, "metrics": metrics}))
"""


@pytest.mark.integration
def test_a_burst_gets_200s_within_the_deadline_and_prompt_429s() -> None:
    pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
    pytest.importorskip("httpx", reason="needs scopeguard[serve]")
    run = subprocess.run([sys.executable, "-c", _BURST], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    replies, metrics = out["replies"], out["metrics"]
    # Only verdicts and prompt refusals, never a timed-out check: what was admitted ran within its
    # deadline, the rest was turned away with a wait to retry after. (How fast, and how many of a
    # burst are taken, depend on the machine: benchmarks/serve.py measures them.)
    codes = sorted({c for c, _, _ in replies})
    assert set(codes) <= {200, 429}, codes
    ok = [body for c, body, _ in replies if c == 200]
    busy = [(body, after) for c, body, after in replies if c == 429]
    assert ok and all(v["label"] == "in_scope" for v in ok)
    for body, after in busy:
        assert after is not None and int(after) >= 1
        assert body["error"]["type"] in ("over_deadline", "queue_full"), body
    if busy:
        assert 'scopeguard_rejected_total{reason="deadline"}' in metrics
    assert 'scopeguard_admission_estimate_seconds{kind="new"}' in metrics
    assert "scopeguard_unread_requests " in metrics  # the server counts what uvicorn holds unread


def test_the_retired_retry_after_setting_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
    from scopeguard.serve import ServeConfig

    with caplog.at_level("WARNING", logger="scopeguard.serve._config"):
        config = ServeConfig(retry_after=3, port=0)  # type: ignore[call-arg]
    assert "retry_after is no longer a setting" in caplog.text and config.queue_size == 1024


def test_unread_requests_count_as_time_already_spent() -> None:
    gate = Admission(deadline=1.0, queue_size=100, headroom=0.8)
    gate.seed("known", 0.1)
    unread = {"seconds": 0.5}  # the HTTP stack holds requests the loop needs 0.5 s to get through
    gate.unread = lambda: (unread["seconds"], unread["seconds"])  # all of them parsed
    tickets = [gate.admit("known") for _ in range(3)]  # 0.5 + 0.3 s: just fits 0.8 x 1 s
    with pytest.raises(Rejected):
        gate.admit("known")
    for t in tickets:
        gate.done(t)
    unread["seconds"] = 0.9  # read again at each decision: now past the line, refused even alone
    assert gate.precheck() is not None and gate.backlog == 0.9
    unread["seconds"] = 0.0
    assert gate.precheck() is None
    gate.unread = lambda: (0.9, 0.0)  # as much, on connections that have sent nothing yet
    first = gate.admit("known")  # alone: admitted (they may be a slow attack, never sending)
    with pytest.raises(Rejected):
        gate.admit("known")  # but nothing more while one runs
    gate.done(first)


class _Connection:
    """What the backlog reads of a uvicorn connection."""

    def __init__(self, *, kept_alive: bool = False, answered: bool | None = None) -> None:
        self.timeout_keep_alive_task = object() if kept_alive else None
        self.cycle = None if answered is None else SimpleNamespace(response_complete=answered)


def test_the_backlog_counts_requests_not_yet_in_the_app_and_times_their_drain() -> None:
    from scopeguard.serve._backlog import Backlog

    unread = [_Connection() for _ in range(4)]  # accepted, not parsed
    parsed = [_Connection(answered=False) for _ in range(8)]  # parsed: 2 in the app, 6 waiting
    # idle between requests (settled); answered and closing (counted until gone: errs to refusing)
    settled = [_Connection(kept_alive=True), _Connection(answered=True)]
    state = SimpleNamespace(connections=set(unread + parsed + settled), tasks=set(range(8)), total_requests=0)
    backlog = Backlog(state, prior=0.001)
    backlog.active = lambda: 2
    assert backlog.sample(now=0.0) == pytest.approx(11 * 0.001)  # no pace measured yet: the prior
    assert backlog.waiting == 11 and backlog.seconds()[1] == pytest.approx(6 * 0.001)  # 6 parsed
    state.total_requests = 5  # 5 answered in 0.1 s while 6 parsed waited: the loop's pace, 20 ms each
    backlog.sample(now=0.1)
    assert backlog.per_request == pytest.approx(0.001 + 0.2 * (0.02 - 0.001))
    state.connections = set(parsed[:2] + settled[:1])
    state.tasks = {0, 1}
    assert backlog.count() == 0  # counted at each decision, not only at a sample
    before = backlog.per_request
    state.total_requests = 12  # more answered than waited: the loop ran short of work, no pace
    assert backlog.sample(now=1.0) == 0.0
    drifted = before + 0.05 * (0.001 - before)  # unmeasured, the pace drifts back to the prior
    assert backlog.per_request == pytest.approx(drifted)
    for t in range(2, 200):  # a quiet server: nothing measured, one stall is not the pace for good
        state.total_requests += 1
        backlog.sample(now=float(t))
    assert backlog.per_request == pytest.approx(0.001, rel=0.01)


def test_the_accept_queue_of_a_real_listening_socket_is_read() -> None:
    import socket
    import sys

    from scopeguard.serve._backlog import accept_queue

    if not sys.platform.startswith("linux"):
        pytest.skip("the accept queue's length is read from Linux's TCP_INFO")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        assert accept_queue(listener) == 0
        clients = [socket.create_connection(listener.getsockname(), timeout=5) for _ in range(3)]
        try:
            deadline = time.monotonic() + 5
            while accept_queue(listener) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert accept_queue(listener) == 3  # connected, not accepted
            listener.accept()[0].close()
            assert accept_queue(listener) == 2
        finally:
            for c in clients:
                c.close()


def test_an_unreadable_server_state_leaves_admission_working(caplog: pytest.LogCaptureFixture) -> None:
    from scopeguard.serve._backlog import Backlog

    class Broken:
        @property
        def connections(self) -> set[object]:
            raise RuntimeError("internals moved")

        tasks = frozenset()
        total_requests = 0

    backlog = Backlog(Broken(), lambda: [object()])  # and a "socket" without getsockopt
    with caplog.at_level("WARNING", logger="scopeguard.serve._backlog"):
        assert backlog.sample(now=0.0) == 0.0 and backlog.seconds() == (0.0, 0.0)
    assert caplog.text.count("cannot count the server's unread requests") == 1
    gate = Admission(deadline=1.0, queue_size=10)
    gate.unread = backlog.seconds
    gate.done(gate.admit("known"))


def test_silent_connections_stop_counting_at_the_next_sample() -> None:
    from scopeguard.serve._backlog import SILENT_AFTER, Backlog

    silent = [_Connection() for _ in range(500)]  # opened, nothing sent (pre-opened, or an attack)
    state = SimpleNamespace(connections=set(silent), tasks=set(), total_requests=0)
    backlog = Backlog(state, prior=0.001)
    assert backlog.sample(now=0.0) == pytest.approx(0.5)  # unread, as far as one sample can tell
    for i in range(1, 20):
        state.total_requests = i  # a request answered now and then
        assert backlog.sample(now=0.05 * i) == pytest.approx(0.5)  # a burst's client may write late
    assert backlog.per_request == pytest.approx(0.001)  # no pace taken from connections, only requests
    state.total_requests = 20
    assert backlog.sample(now=SILENT_AFTER) == 0.0  # a second without a request: silent, not work
    fresh = _Connection()
    state.connections.add(fresh)
    assert backlog.count() == 1  # a new connection counts until it has been silent as long


@pytest.mark.integration
def test_unread_connections_on_a_real_server_are_counted_then_known_silent() -> None:
    pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
    httpx = pytest.importorskip("httpx", reason="needs scopeguard[serve]")
    import re
    import socket
    from urllib.parse import urlsplit

    from scopeguard.serve import ServeConfig
    from scopeguard.testing import running_guard_server

    def unread(url: str) -> float:
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
        return float(re.search(r"^scopeguard_unread_requests (\S+)$", metrics, re.MULTILINE).group(1))  # type: ignore[union-attr]

    # 300 connections that send nothing x the 1 ms prior pace: 0.3 s, past 0.8 x a 0.3 s deadline
    config = ServeConfig(detector="lexical", port=0, deadline=0.3)
    body = {"question": "Who built the pier?", "documents": ["The pier was built in 1901."]}
    with running_guard_server(config) as url:
        address = urlsplit(url)
        silent = [socket.create_connection((address.hostname, address.port), timeout=10) for _ in range(300)]
        try:
            time.sleep(0.2)  # a few ticks of the loop's watcher
            assert unread(url) >= 300  # counted: they may be a burst's requests not yet read
            # but they may also never send anything: a lone request is not refused for them
            reply = httpx.post(f"{url}/v1/check", json=body, timeout=30)
            assert reply.status_code == 200, reply.text
            deadline = time.monotonic() + 20
            while unread(url) > 0:  # silent for a second: no longer counted
                assert time.monotonic() < deadline, "silent connections stayed counted"
                time.sleep(0.2)
        finally:
            for s in silent:
                s.close()
