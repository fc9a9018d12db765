"""``scopeguard check``: the detector line names the detector as the user did, with its stages,
and ``--deadline`` bounds the whole check. Scripted detectors only: no model is loaded."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard import BaseDetector, Document, Verdict
from scopeguard.cli import app
from scopeguard.detection.detectors import register_detector
from scopeguard.detection.detectors import registry as detector_registry
from scopeguard.detection.detectors.cascade import CascadeDetector
from scopeguard.llm.deadline import check_deadline, current
from scopeguard.testing import ScriptedDetector, calibration_profile

DOC = "The ferry Kestrel carries 180 passengers across the bay in 35 minutes."


class _Staged(BaseDetector):
    """Stands for a two-stage cascade: returns the scripted verdict of one of its stages."""

    name = "default"
    stages = ("fast", "logprob")

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        return self.verdict


class _Budgeted(BaseDetector):
    """Stands for an LLM backend honouring the deadline: waits ``seconds``, then checks it."""

    name = "budgeted"

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        time.sleep(self.seconds)
        check_deadline("the scripted LLM call")
        budget = current()
        return Verdict(label="in_scope", score=0.1, rationale=f"budget {budget.seconds if budget else None}")


class _Exploding(BaseDetector):
    name = "exploding"

    def __init__(self) -> None:
        raise AssertionError("the detector was built before the options were checked")


IN = Verdict(label="in_scope", score=0.1)


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations in a test stay in that test."""
    monkeypatch.setattr(detector_registry, "_DETECTORS", dict(detector_registry._DETECTORS))
    register_detector("exploding", _Exploding)
    register_detector("budgeted", _Budgeted)


@pytest.fixture()
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "ferry.txt"
    path.write_text(DOC, encoding="utf-8")
    return path


def _check(doc: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["check", "-q", "How many passengers?", "-d", str(doc), *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def _detector_line(out: str) -> str:
    (line,) = [x for x in out.splitlines() if x.startswith("detector:")]
    return line


@pytest.mark.parametrize(
    ("verdict", "shown"),
    [
        (IN.model_copy(update={"stage": "fast"}), "default (fast -> logprob; decided by fast)"),
        (
            IN.model_copy(update={"stage": "logprob", "escalated": True, "llm_calls": 1}),
            "default (fast -> logprob; decided by logprob)",
        ),
        (
            IN.model_copy(update={"stage": "fast", "escalated": True, "error": "LLMTimeoutError: late"}),
            "default (fast -> logprob; decided by fast, logprob failed)",
        ),
    ],
)
def test_the_default_detector_is_shown_with_its_stages(doc: Path, verdict: Verdict, shown: str) -> None:
    register_detector("default", lambda: _Staged(verdict))
    code, out, err = _check(doc, "--detector", "default")
    assert code == 0, out + err
    line = _detector_line(out)
    assert line.startswith(f"detector: {shown}  (") and f"{verdict.llm_calls} LLM calls)" in line
    assert "label:    in_scope" in out and "score:    0.100" in out  # the other lines are kept
    data = json.loads(_check(doc, "--detector", "default", "--json")[1])
    assert data["detector"] == "default" and data["stage"] == verdict.stage
    assert data["escalated"] is verdict.escalated


def test_other_detectors_are_shown_as_named(doc: Path) -> None:
    register_detector("plain", lambda: ScriptedDetector(lambda _q: IN, name="plain"))
    assert _detector_line(_check(doc, "--detector", "plain")[1]).startswith("detector: plain  (")
    # a name that stands for a detector of another name (what `default` was: the fast stage alone)
    register_detector("alias", lambda: ScriptedDetector(lambda _q: IN, name="fast"))
    assert _detector_line(_check(doc, "--detector", "alias")[1]).startswith("detector: alias (fast)  (")
    # a stage named by the verdict, the detector declaring no stages
    staged = IN.model_copy(update={"stage": "logprob"})
    register_detector("staged", lambda: ScriptedDetector(lambda _q: staged, name="staged"))
    line = _detector_line(_check(doc, "--detector", "staged")[1])
    assert line.startswith("detector: staged (decided by logprob)  (")


def test_a_cascade_shows_the_stage_that_decided(doc: Path) -> None:
    unsure = Verdict(label="in_scope", score=0.5)
    register_detector(
        "two-step",
        lambda: CascadeDetector(
            ScriptedDetector(lambda _q: unsure, name="fast"),
            ScriptedDetector(lambda _q: IN, name="judge"),
            name="two-step",
        ),
    )
    line = _detector_line(_check(doc, "--detector", "two-step")[1])
    assert line.startswith("detector: two-step (fast -> judge; decided by judge)  (")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_deadline_must_be_positive_and_is_checked_before_the_detector_is_built(doc: Path, value: str) -> None:
    code, _, err = _check(doc, "--detector", "exploding", "--deadline", value)
    assert code == 2 and "--deadline must be a positive number of seconds" in err, err


def test_deadline_must_be_a_number(doc: Path) -> None:
    code, _, err = _check(doc, "--detector", "exploding", "--deadline", "soon")
    assert code == 2 and "Usage:" in err  # click's own usage error


def test_deadline_bounds_the_detect_call(doc: Path) -> None:
    code, out, err = _check(doc, "--detector", "budgeted", "--deadline", "5")
    assert code == 0 and "rationale: budget 5.0" in out, out + err
    assert "rationale: budget None" in _check(doc, "--detector", "budgeted")[1]  # no deadline by default
    register_detector("budgeted", lambda: _Budgeted(seconds=0.2))
    code, _, err = _check(doc, "--detector", "budgeted", "--deadline", "0.05")
    assert code == 2 and "ran past its deadline of 0.05s" in err, err


# -- --calibration ----------------------------------------------------------------------------
def test_calibration_relabels_and_names_the_profile(doc: Path, tmp_path: Path) -> None:
    register_detector("scored", lambda: ScriptedDetector(lambda _q: 0.55, name="scored"))
    assert "label:    out_of_scope" in _check(doc, "--detector", "scored")[1]  # its own threshold, 0.5
    folder = calibration_profile("scored", folder=tmp_path / "cal")  # 0.6, hedged from 0.4
    code, out, err = _check(doc, "--detector", "scored", "--calibration", str(folder))
    assert code == 0, out + err
    assert "label:    in_scope  (hedge: in scope, answer with a caveat)" in out
    (line,) = [x for x in out.splitlines() if x.startswith("profile:")]
    assert str(folder / "profile.json") in line and "scored at threshold 0.600, hedge from 0.400" in line
    code, out, err = _check(doc, "--detector", "scored", "--calibration", str(folder), "--json")
    assert code == 0 and f"calibration: {folder / 'profile.json'}: scored at threshold" in err
    verdict = json.loads(out)
    assert (verdict["label"], verdict["hedge"], verdict["score"]) == ("in_scope", True, 0.55)


def test_calibration_for_another_detector_or_nowhere_exits_2(doc: Path, tmp_path: Path) -> None:
    register_detector("scored", lambda: ScriptedDetector(lambda _q: 0.55, name="scored"))
    folder = calibration_profile("other", folder=tmp_path / "cal")
    code, out, err = _check(doc, "--detector", "scored", "--calibration", str(folder))
    assert code == 2 and out == ""
    assert "made for another detector (detector: profile 'other', detector 'scored')" in err
    assert len(err.strip().splitlines()) == 1
    # a missing profile is reported before the detector is built
    code, _, err = _check(doc, "--detector", "exploding", "--calibration", str(tmp_path / "nowhere"))
    assert code == 2 and "no calibration profile at" in err, err


# -- --reader ---------------------------------------------------------------------------------
def test_reader_goes_to_a_detector_that_reads(doc: Path, reading_detector) -> None:
    seen = reading_detector("default", lambda: ScriptedDetector(lambda _q: IN, name="default"))
    code, out, err = _check(doc, "--detector", "default", "--reader", "local:readers/mine")
    assert code == 0 and "label:    in_scope" in out, out + err
    assert seen == ["local:readers/mine"]


def test_reader_for_a_detector_that_does_not_read_exits_2_in_one_line(doc: Path) -> None:
    code, out, err = _check(doc, "--detector", "lexical", "--reader", "local:readers/mine")
    assert code == 2 and out == ""
    assert err.strip() == (
        "error: detector 'lexical' reads with no model: it takes no reader (the detectors that do: "
        "default, logprob)"
    )


@pytest.mark.parametrize("detector", ["default", "logprob"])
def test_llm_to_a_detector_that_reads_names_reader(doc: Path, detector: str) -> None:
    code, _, err = _check(doc, "--detector", detector, "--llm", "local")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"--llm is the judge's LLM: detector {detector!r} takes its reading model as --reader SPEC" in err
    code, _, err = _check(doc, "--detector", "lexical", "--llm", "local")
    assert code == 2 and "--llm does not apply to --detector lexical" in err


def test_read_mode_is_for_the_default_detector_and_checked_before_a_model_loads(doc: Path) -> None:
    code, _, err = _check(doc, "--detector", "fast", "--read", "set")
    assert code == 2 and "--read applies to the default detector, not to 'fast'" in err
    code, _, err = _check(doc, "--read", "sets")
    assert code == 2 and "read must be one of passages, set, got 'sets'" in err
