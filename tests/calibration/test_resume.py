"""A calibration resumes: generated documents are not generated again, scored questions are not
read again (unless the detector changed), a torn last line is repaired, failed reads are retried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopeguard.calibration import run_calibration
from scopeguard.errors import ConfigurationError, DetectionError
from scopeguard.testing import ScriptedChatModel

from .conftest import IdentifiedDetector, fake_score


class _Killed(BaseException):
    """Stands for a kill in the middle of the reading."""


def _lines(out: Path) -> list[str]:
    return (out / "scores.jsonl").read_text().splitlines()


def test_a_killed_run_reads_only_what_is_left(tmp_path: Path, corpus: Path, llm: ScriptedChatModel) -> None:
    out = tmp_path / "calib"
    seen: list[str] = []

    def dies_after_7(question: str) -> float | BaseException:
        seen.append(question)
        return _Killed() if len(seen) == 8 else fake_score(question)

    with pytest.raises(_Killed):
        run_calibration(corpus, out, detector=IdentifiedDetector(dies_after_7), llm=llm, progress=False)
    assert len(_lines(out)) == 7 and not (out / "profile.json").exists()
    generated_calls = len(llm.calls)
    # a kill mid-append leaves half a line: cut on the next run
    with (out / "scores.jsonl").open("a") as fh:
        fh.write('{"key": "half a li')

    again = IdentifiedDetector(fake_score)
    run = run_calibration(corpus, out, detector=again, llm=llm, progress=False)
    assert len(llm.calls) == generated_calls  # every document was generated already
    assert run.reused == 7 and run.read == run.questions - 7 == again.calls
    assert len(_lines(out)) == run.questions
    assert all(json.loads(line)["key"] for line in _lines(out))

    third = IdentifiedDetector(fake_score)
    run = run_calibration(corpus, out, detector=third, llm=llm, progress=False, budget=0.15)
    assert third.calls == 0 and run.reused == run.questions  # another budget: nothing read again
    assert run.profile.budget == 0.15


def test_another_detector_reads_everything_again(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel
) -> None:
    out = tmp_path / "calib"
    first = IdentifiedDetector(fake_score, head="h1")
    run_calibration(corpus, out, detector=first, llm=llm, progress=False)
    retrained = IdentifiedDetector(fake_score, head="h2")
    run = run_calibration(corpus, out, detector=retrained, llm=llm, progress=False)
    assert retrained.calls == first.calls == run.questions and run.reused == 0
    assert run.profile.identity["head"] == "h2"


def test_a_larger_sample_reuses_the_documents_and_scores(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel
) -> None:
    out = tmp_path / "calib"
    first = IdentifiedDetector(fake_score)
    small = run_calibration(corpus, out, detector=first, llm=llm, progress=False, sample=4, budget=0.25)
    calls = len(llm.calls)
    second = IdentifiedDetector(fake_score)
    large = run_calibration(corpus, out, detector=second, llm=llm, progress=False, sample=5, budget=0.25)
    # one more document generated (the same seed draws the same four and one more), its questions read
    assert 0 < len(llm.calls) - calls < calls / 2
    assert large.reused == small.questions and second.calls == large.questions - small.questions > 0


def test_failed_reads_are_counted_left_out_and_retried(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel
) -> None:
    out = tmp_path / "calib"
    failing: list[str] = []

    def flaky(question: str) -> float | BaseException | None:
        if "operator 4" in question:  # one out-of-scope question of each document: an unknown verdict
            failing.append(question)
            return None
        if "number 3" in question and "ferry" in question:
            return DetectionError("the reader crashed")
        return fake_score(question)

    run = run_calibration(corpus, out, detector=IdentifiedDetector(flaky), llm=llm, progress=False)
    assert failing and run.unread == len(failing) + 1 > 1
    assert len(_lines(out)) == run.questions - run.unread  # never written with a label
    assert run.profile.false_refusals.n + run.profile.caught.n == run.questions - run.unread
    assert any("could not be read" in note for note in run.profile.notes)
    assert "could not be read and are left out" in (out / "report.md").read_text()

    fixed = IdentifiedDetector(fake_score)
    run = run_calibration(corpus, out, detector=fixed, llm=llm, progress=False)
    assert fixed.calls == len(failing) + 1 and run.unread == 0


def test_another_corpus_in_the_same_folder_is_refused(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel
) -> None:
    out = tmp_path / "calib"
    run_calibration(corpus, out, detector=IdentifiedDetector(fake_score), llm=llm, progress=False)
    corpus.write_text(corpus.read_text().replace("harbour", "river"))
    with pytest.raises(ConfigurationError, match="corpus_sha256"):
        run_calibration(corpus, out, detector=IdentifiedDetector(fake_score), llm=llm, progress=False)
