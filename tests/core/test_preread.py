"""``Guard.preread`` and ``Guard.preread_in_background``: a corpus read ahead of the questions, on a
daemon thread that never holds a check up for more than the document it is reading."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
from pathlib import Path

import pytest

from scopeguard import Guard, InputError, LLMError, PrereadJob, PrereadReport
from scopeguard._prereading import CheckGate
from scopeguard.detection.detectors import Prereader
from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.detection.read.llama_states import STATE_SUFFIX
from scopeguard.testing import ScriptedDetector, ScriptedPrefixScorer, calibration_profile
from scopeguard.types import Document, as_documents

CORPUS = [f"Record {i}: the Brindlewick pier was painted in {1900 + i} by crew {i}." for i in range(12)]
QUESTION = "When was the pier painted?"


def reading_guard(read_seconds: float = 0.0, **options: object) -> tuple[Guard, ScriptedPrefixScorer]:
    """A guard whose ``logprob`` detector reads with a scripted scorer that keeps what it read."""
    scorer = ScriptedPrefixScorer(lambda prompt: -5.0, read_seconds=read_seconds)
    return Guard(detector=LogProbDetector(reader=scorer), **options), scorer  # type: ignore[arg-type]


def documents_read(scorer: ScriptedPrefixScorer) -> list[str]:
    """The corpus documents the scorer has read (the instruction and other texts aside)."""
    return [doc for doc in CORPUS if any(doc in prefix for prefix in scorer.reads)]


def test_preread_reads_each_document_once_and_a_later_check_reads_nothing_more() -> None:
    guard, scorer = reading_guard()
    assert isinstance(guard.detector, Prereader)
    assert guard.preread(CORPUS[:3], progress=False) == 3
    assert documents_read(scorer) == CORPUS[:3]
    reads = len(scorer.reads)
    assert guard.check(QUESTION, [CORPUS[1]]).label == "in_scope"
    assert len(scorer.reads) == reads  # the document's state was kept: only the question was asked
    assert guard.preread([]) == 0  # nothing to read is no error
    with pytest.raises(InputError, match="empty"):
        guard.preread(["  "])


class DiskKeepingScorer(ScriptedPrefixScorer):
    """A scripted scorer that also saves a 1000-byte state file in ``state_dir`` per prefix read."""

    def _read(self, prefix: str) -> None:
        super()._read(prefix)
        assert self.state_dir is not None
        path = self.state_dir / f"{hashlib.sha256(prefix.encode()).hexdigest()[:16]}{STATE_SUFFIX}"
        if not path.exists():
            path.write_bytes(b"\0" * 1000)


def test_preread_reports_what_it_cost_and_compares_like_the_passage_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard, _ = reading_guard()
    with caplog.at_level(logging.INFO, logger="scopeguard.guard"):
        report = guard.preread(CORPUS[:3], progress=False)
    assert isinstance(report, PrereadReport)
    assert (report.passages, report.documents, report.bytes_on_disk) == (3, 3, 0)  # nothing on disk
    assert report.seconds >= 0
    assert report == 3 and 3 == report and report != 2 and int(report) == 3 and bool(report)  # noqa: SIM300
    assert [0, 1, 2, 3][report] == 3 and range(5)[:report] == range(3)  # __index__
    assert (
        f"pre-read 3 passages of 3 documents in {report.seconds:.1f} s; 0 B of states on disk" in caplog.text
    )
    empty = guard.preread([])
    assert empty == 0 and not empty and empty.documents == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.passages = 4  # type: ignore[misc]


def test_the_summary_is_one_line_in_readable_units() -> None:
    report = PrereadReport(passages=120, documents=120, seconds=341.2, bytes_on_disk=1_234_000_000)
    assert report.summary() == "pre-read 120 passages of 120 documents in 341 s; 1.2 GB of states on disk"
    small = PrereadReport(passages=2, documents=3, seconds=0.42, bytes_on_disk=56_700_000)
    assert small.summary() == "pre-read 2 passages of 3 documents in 0.4 s; 57 MB of states on disk"
    assert PrereadReport(1, 1, 1.0, 999).summary().endswith("; 999 B of states on disk")
    same = PrereadReport(passages=2, documents=3, seconds=0.42, bytes_on_disk=56_700_000)
    assert small == same and small != report and hash(small) == hash(2) and small != "2"


def test_bytes_on_disk_is_what_the_kept_states_added_to_the_state_folder(tmp_path: Path) -> None:
    scorer = DiskKeepingScorer(lambda prompt: -5.0, state_dir=tmp_path)
    guard = Guard(detector=LogProbDetector(reader=scorer))  # type: ignore[arg-type]
    (tmp_path / f"older{STATE_SUFFIX}").write_bytes(b"\0" * 500)  # there before: not this pre-read's
    report = guard.preread(CORPUS[:3], progress=False)
    assert report == 3 and report.bytes_on_disk == 4 * 1000  # the instruction's state and one per document
    assert guard.preread(CORPUS[:3], progress=False).bytes_on_disk == 0  # kept already: nothing added
    job = guard.preread_in_background(CORPUS[3:5])
    assert job.wait(10) and job.report is not None
    assert (job.report.passages, job.report.documents, job.report.bytes_on_disk) == (2, 2, 2000)


def test_a_detector_that_does_not_preread_reads_nothing(caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard(detector=ScriptedDetector(["in_scope"]))
    with caplog.at_level(logging.DEBUG, logger="scopeguard.guard"):
        assert guard.preread(CORPUS) == 0
    assert "does not pre-read" in caplog.text
    job = guard.preread_in_background(CORPUS)
    assert job.wait(5) and (job.result, job.total, job.error) == (0, 0, None)
    assert job.report is not None and (job.report.passages, job.report.bytes_on_disk) == (0, 0)


def test_a_calibrated_detector_prereads_through_to_the_one_it_wraps() -> None:
    scorer = ScriptedPrefixScorer(lambda prompt: -5.0)
    detector = LogProbDetector(reader=scorer)
    guard = Guard(detector=detector, calibration=calibration_profile(detector))
    assert guard.calibration is not None and guard.detector is not detector
    assert guard.preread(CORPUS[:2]) == 2 and documents_read(scorer) == CORPUS[:2]


async def test_apreread_reads_on_a_worker_thread() -> None:
    guard, scorer = reading_guard()
    assert await guard.apreread(CORPUS[:2]) == 2
    assert documents_read(scorer) == CORPUS[:2]


def test_a_check_finishes_while_a_long_background_preread_runs() -> None:
    """Each document takes 0.3 s to read (12 of them: 3.6 s); a check on another document waits at
    most for the one being read when it came, and finishes long before the job."""
    guard, scorer = reading_guard(read_seconds=0.3)
    guard.preread(["An unrelated warm-up note."])  # the instruction is read once, before timing
    job = guard.preread_in_background(CORPUS)
    while job.read < 2:
        time.sleep(0.01)
    started = time.perf_counter()
    verdict = guard.check(QUESTION, ["The pier was painted in 1907."])
    took = time.perf_counter() - started
    assert verdict.label == "in_scope"
    assert took < 1.5  # its own read (0.3 s) and at most the document in progress (0.3 s)
    assert not job.done() and job.read < len(CORPUS)
    assert job.wait(30) and job.result == len(CORPUS) and job.error is None
    assert documents_read(scorer) == CORPUS


async def test_an_async_check_gets_its_turn_too() -> None:
    guard, _ = reading_guard(read_seconds=0.3)
    job = guard.preread_in_background(CORPUS)
    while job.read < 1:
        await asyncio.sleep(0.01)
    verdict = await asyncio.wait_for(guard.acheck(QUESTION, ["The pier was painted in 1907."]), 3)
    assert verdict.label == "in_scope" and not job.done()
    job.cancel()
    assert job.wait(5)


def test_the_job_reads_no_document_while_a_check_runs() -> None:
    gate, read = CheckGate(), []

    def read_one(doc: Document) -> int:
        read.append(doc.text)
        return 1

    with gate.checking():
        job = PrereadJob(read_one, as_documents(CORPUS[:3]), gate=gate)
        time.sleep(0.3)
        assert read == [] and job.read == 0 and gate.running == 1 and job.report is None
    assert job.wait(5) and job.result == 3 and read == CORPUS[:3]
    assert job.report is not None and job.report == 3 and job.report.documents == 3
    assert job.report.seconds > 0 and job.report.bytes_on_disk == 0  # it waited for the check; no disk


def test_cancel_stops_between_documents() -> None:
    guard, scorer = reading_guard(read_seconds=0.1)
    job = guard.preread_in_background(CORPUS)
    while job.read < 2:
        time.sleep(0.01)
    job.cancel()
    assert job.wait(5) and job.done() and job.cancelled
    stopped_at = job.read
    assert 2 <= stopped_at < len(CORPUS) and job.result is None and job.error is None
    assert job.report is None  # no report of a part
    time.sleep(0.3)
    assert job.read == stopped_at and len(documents_read(scorer)) == stopped_at  # nothing after the stop
    assert "cancelled" in repr(job)


def test_an_error_stops_the_job_and_is_kept_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    guard, scorer = reading_guard()
    real_prime = scorer.prime

    def prime(messages, *, upto, create=True):  # type: ignore[no-untyped-def]
        if CORPUS[2] in messages[0].content:
            raise LLMError("llama.cpp failed to read the start of the verdict prompt")
        return real_prime(messages, upto=upto, create=create)

    scorer.prime = prime  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="scopeguard._prereading"):
        job = guard.preread_in_background(CORPUS)
        assert job.wait(10)
    assert isinstance(job.error, LLMError) and job.result is None and job.read == 2 and job.report is None
    assert "pre-read stopped after 2 of 12 documents: LLMError" in caplog.text


@pytest.mark.slow
@pytest.mark.integration
def test_a_real_reader_prereads_in_the_background_while_checks_run(smollm2: Path, tmp_path: Path) -> None:
    """llama.cpp (SmolLM2) pre-reads on the job's thread while the caller's thread checks: one
    context, one lock per call; every verdict is a fresh read's and every document's state is kept."""
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    def detector(**options: object) -> LogProbDetector:
        return LogProbDetector(reader=LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, **options))  # type: ignore[arg-type]

    docs = CORPUS[:4]
    fresh = detector(state_cache_mb=0, persist_states=False)
    expected = [fresh.detect(QUESTION, [d]).score for d in docs]
    guard = Guard(detector=detector(state_dir=tmp_path))
    job = guard.preread_in_background(docs)
    got = [guard.check(QUESTION, [d]).score for d in reversed(docs)]  # against the job's order
    assert job.wait(300) and job.error is None and job.result == len(docs)
    kept = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert job.report is not None and 0 < job.report.bytes_on_disk <= kept  # the documents' states at least
    # up to llama.cpp's rounding, which depends on how the tokens were batched (a document read by a
    # check, then kept, or by the job): SmolLM2's P moved by up to 0.045 with the default f16 KV
    # cache, 0.075 with q8_0 (flash attention)
    assert got[::-1] == pytest.approx(expected, abs=0.1)
    assert len(list(tmp_path.iterdir())) == 1 + len(docs)  # the instruction's state and one per document


@pytest.mark.slow
@pytest.mark.integration
def test_a_real_reader_reports_the_bytes_its_states_took_on_disk(
    smollm2: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """llama.cpp (SmolLM2) with a fresh state folder: every state file in it came from the pre-read."""
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    guard = Guard(
        detector=LogProbDetector(
            reader=LlamaCppVerdicts(smollm2, n_threads=1, n_ctx=1024, state_dir=tmp_path)
        )
    )  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="scopeguard.guard"):
        report = guard.preread(CORPUS[:2], progress=False)
    assert report == 2 and report.documents == 2 and report.seconds > 0
    assert report.bytes_on_disk == sum(p.stat().st_size for p in tmp_path.iterdir()) > 0
    assert report.summary() in caplog.text and "of states on disk" in caplog.text
