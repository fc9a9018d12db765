"""The reading model's one queue: calls run one at a time, a queued call gives up at its deadline."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from threading import current_thread

import pytest

pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")

from scopeguard.errors import ConfigurationError, LLMTimeoutError
from scopeguard.llm.deadline import deadline, remaining
from scopeguard.serve._runtime import ReadingLane, SerialScorer
from scopeguard.testing import ScriptedVerdictScorer


def test_calls_run_one_at_a_time_and_see_the_callers_deadline() -> None:
    lane = ReadingLane()
    running, peak, lock = 0, 0, threading.Lock()

    def read(i: int) -> float | None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return remaining()

    def call(i: int) -> float | None:
        with deadline(30):
            return lane.run(read, i)

    with ThreadPoolExecutor(6) as pool:
        left = list(pool.map(call, range(12)))
    assert peak == 1 and lane.depth == 0
    assert all(s is not None and 0 < s <= 30 for s in left)  # the deadline followed the call
    lane.close()


def test_a_queued_call_gives_up_at_its_deadline() -> None:
    lane, gate = ReadingLane(), threading.Event()
    blocker = threading.Thread(target=lambda: lane.run(gate.wait, 10))
    blocker.start()
    while lane.depth == 0:
        time.sleep(0.01)
    with deadline(0.2), pytest.raises(LLMTimeoutError, match="reading model's queue"):
        lane.run(lambda: "never")
    gate.set()
    blocker.join()
    assert lane.depth == 0
    lane.close()


def test_serial_scorer_forwards_only_what_the_scorer_has() -> None:
    scorer = ScriptedVerdictScorer(lambda text: 1.0)
    wrapped = SerialScorer(scorer, ReadingLane())
    assert wrapped.name == scorer.name and wrapped.count_tokens("a b c") == scorer.count_tokens("a b c")
    assert not hasattr(wrapped, "prime") and not hasattr(wrapped, "load")  # the scripted one has neither
    wrapped.lane.close()


def test_a_detector_that_reads_gets_the_configured_reader_behind_the_lane(reading_detector) -> None:
    from scopeguard.detection.detectors.logprob import LogProbDetector
    from scopeguard.serve import ServeConfig
    from scopeguard.serve._runtime import build_detector

    threads: list[str] = []

    def margin(prompt: str) -> float:
        threads.append(current_thread().name)
        return -5.0

    # the spec stands for a scripted reading model
    specs = reading_detector("reading", lambda: LogProbDetector(reader=ScriptedVerdictScorer(margin)))
    lane = ReadingLane()
    detector = build_detector(ServeConfig(detector="reading", reader="local:readers/mine"), lane)
    assert specs == ["local:readers/mine"]
    assert isinstance(detector.reader.scorer, SerialScorer)  # type: ignore[attr-defined]
    assert detector.detect("When?", ["It opened in 2019."]).label == "in_scope"
    assert threads and all(t.startswith("scopeguard-reading") for t in threads)
    build_detector(ServeConfig(detector="reading"), lane)  # no reader: the one it builds itself
    assert specs[-1] is None
    lane.close()


def test_a_reader_for_a_detector_that_does_not_read_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from scopeguard.cli import app
    from scopeguard.serve import _telemetry

    monkeypatch.setattr(_telemetry, "configure_json_logs", lambda level: None)  # keep pytest's logging
    res = CliRunner().invoke(app, ["serve", "--detector", "lexical", "--reader", "local:readers/mine"])
    assert res.exit_code == 2
    assert "error: detector 'lexical' reads with no model: it takes no reader" in res.output


def test_a_set_read_goes_through_the_lane_and_read_applies_only_to_the_default_detector() -> None:
    from scopeguard.serve import ServeConfig
    from scopeguard.serve._runtime import build_detector

    class SetReading(ScriptedVerdictScorer):
        def score_set(self, prompts: object, *, template: str = "") -> str:
            return current_thread().name

    wrapped = SerialScorer(SetReading(lambda text: 1.0), ReadingLane())
    assert wrapped.score_set([]).startswith("scopeguard-reading")  # type: ignore[attr-defined]
    assert not hasattr(SerialScorer(ScriptedVerdictScorer(lambda text: 1.0), wrapped.lane), "score_set")
    wrapped.lane.close()
    with pytest.raises(ConfigurationError, match="--read applies to the default detector, not to 'fast'"):
        build_detector(ServeConfig(detector="fast", read="set"), ReadingLane())
    with pytest.raises(ValueError, match="read"):
        ServeConfig(read="sets")  # type: ignore[arg-type]
