"""Calibration profiles: the exact intervals, the conformal threshold, reading a profile, and a
guard whose detector's verdicts the profile relabels (scripted detectors: no model is loaded)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from scopeguard import ConfigurationError, Guard, Verdict, get_detector, load_profile
from scopeguard.detection.profile import (
    PROFILE_FILE,
    CalibratedDetector,
    budget_threshold,
    calibrated,
    clopper_pearson,
    rate,
    scores_of,
)
from scopeguard.testing import ScriptedDetector, calibration_profile

DOC = "The Kestrel ferry carries 180 passengers and crosses in 35 minutes."
# scores of P(out of scope) by question: the scripted detector's own threshold is 0.5
SCORES: dict[str, float | None] = {"clear?": 0.2, "hedge?": 0.45, "edge?": 0.55, "out?": 0.8, "failed?": None}


@pytest.fixture()
def scripted() -> ScriptedDetector:
    return ScriptedDetector(SCORES)


@pytest.fixture()
def folder(tmp_path: Path, scripted: ScriptedDetector) -> Path:
    return calibration_profile(scripted, folder=tmp_path / "profile")  # threshold 0.6, hedged from 0.4


# -- the exact interval and the conformal threshold ---------------------------------------------
@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(0, 10, 0.0, 0.3085), (5, 10, 0.1871, 0.8129), (10, 10, 0.6915, 1.0), (1, 20, 0.0013, 0.2487)],
)
def test_clopper_pearson_matches_known_values(k: int, n: int, low: float, high: float) -> None:
    got = clopper_pearson(k, n)
    assert got == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))


def test_clopper_pearson_edges() -> None:
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    with pytest.raises(ConfigurationError, match="0 <= k <= n"):
        clopper_pearson(3, 2)
    assert str(rate(5, 10)) == "0.50 [0.19, 0.81] (5 of 10)"
    assert rate(0, 0).value is None and "no questions" in str(rate(0, 0))


def test_budget_threshold_is_the_conformal_rank() -> None:
    scores = [i / 20 for i in range(19)]  # 0.0 .. 0.9, n = 19
    # rank ceil((19 + 1) * 0.9) = 18: just above the 18th smallest score, 0.85
    t = budget_threshold(scores, 0.1)
    assert 0.85 < t < 0.850001
    assert sum(s >= t for s in scores) / len(scores) <= 0.1
    assert budget_threshold(reversed(scores), 0.1) == t  # order does not matter
    # the smallest sample that can promise a 10% budget: 9 questions, threshold above the largest
    assert budget_threshold([0.1] * 8 + [0.3], 0.1) > 0.3
    # float error does not cost a rank: 150 * (1 - 0.18) is 123, not 123.00000000000001
    many = [i / 1000 for i in range(149)]
    assert many[122] < budget_threshold(many, 0.18) < many[123]


def test_budget_threshold_needs_enough_questions_and_a_budget() -> None:
    with pytest.raises(ConfigurationError, match=r"needs at least 9 in-scope questions .* got 5"):
        budget_threshold([0.1] * 5, 0.1)
    for budget in (0.0, 1.0, -0.1):
        with pytest.raises(ConfigurationError, match="budget must be in"):
            budget_threshold([0.1] * 50, budget)
    with pytest.raises(ConfigurationError, match="probabilities"):
        budget_threshold([0.1] * 49 + [1.5], 0.1)


def test_scores_of_leaves_failed_reads_out() -> None:
    verdicts = [Verdict(label="in_scope", score=0.2), Verdict(label="unknown"), Verdict(label="in_scope")]
    assert scores_of(verdicts) == [0.2]


# -- the profile record and its file -------------------------------------------------------------
def test_band_and_a_hedge_above_the_threshold_is_refused(scripted: ScriptedDetector) -> None:
    profile = calibration_profile(scripted)
    assert [profile.band(s) for s in (0.1, 0.4, 0.59, 0.6, 0.9)] == [
        "answer",
        "hedge",
        "hedge",
        "defuse",
        "defuse",
    ]
    assert calibration_profile(scripted, hedge_from=None).band(0.5) == "answer"
    with pytest.raises(ValidationError, match="hedge_from"):
        calibration_profile(scripted, hedge_from=0.7)
    assert "threshold 0.600" in profile.summary() and "hedge from 0.400" in profile.summary()


def test_save_and_load_from_the_folder_or_the_file(folder: Path, scripted: ScriptedDetector) -> None:
    assert load_profile(folder) == calibration_profile(scripted)
    assert load_profile(folder / PROFILE_FILE) == load_profile(str(folder))
    profile = load_profile(folder)
    assert load_profile(profile) is profile


def test_load_profile_errors_say_what_is_wrong(tmp_path: Path, folder: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"no calibration profile at .*nowhere"):
        load_profile(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigurationError, match=r"expected a folder with profile\.json"):
        load_profile(empty)
    path = folder / PROFILE_FILE
    raw = json.loads(path.read_text())
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not a readable calibration profile"):
        load_profile(folder)
    path.write_text(json.dumps({**raw, "version": 99}), encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"version 99 is newer .* upgrade scopeguard"):
        load_profile(folder)
    path.write_text(json.dumps({**raw, "version": "two"}), encoding="utf-8")  # no TypeError
    with pytest.raises(ConfigurationError, match="not a calibration profile \\(version:"):
        load_profile(folder)
    path.write_text(json.dumps({**raw, "threshold": 1.5}), encoding="utf-8")
    with pytest.raises(ConfigurationError, match="threshold"):
        load_profile(folder)
    path.write_text(json.dumps([1, 2]), encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not a calibration profile"):
        load_profile(folder)


# -- a guard under a profile ----------------------------------------------------------------------
def test_guard_relabels_by_the_profile_and_marks_the_hedge_band(
    folder: Path, scripted: ScriptedDetector
) -> None:
    bare = Guard(detector=ScriptedDetector(SCORES))
    guard = Guard(detector=scripted, calibration=folder)
    assert bare.calibration is None and guard.calibration == load_profile(folder)
    assert isinstance(guard.detector, CalibratedDetector) and guard.detector.name == "scripted"

    def seen(g: Guard, question: str) -> tuple[str, bool]:
        v = g.check(question, [DOC])
        return v.label, v.hedge

    assert seen(bare, "edge?") == ("out_of_scope", False)  # its own threshold, 0.5
    assert seen(guard, "clear?") == ("in_scope", False)
    assert seen(guard, "hedge?") == ("in_scope", True)
    assert seen(guard, "edge?") == ("in_scope", True)  # below the profile's 0.6: in scope, hedged
    assert seen(guard, "out?") == ("out_of_scope", False)
    failed = guard.check("failed?", [DOC])
    assert failed.label == "unknown" and failed.hedge is False  # left as the detector said
    assert guard.check("edge?", [DOC]).score == 0.55  # the score is the detector's


async def test_async_checks_are_relabelled_too(folder: Path, scripted: ScriptedDetector) -> None:
    guard = Guard(detector=scripted, calibration=load_profile(folder))
    verdict = await guard.acheck("edge?", [DOC])
    assert (verdict.label, verdict.hedge) == ("in_scope", True)


def test_a_profile_for_another_detector_is_refused(tmp_path: Path, scripted: ScriptedDetector) -> None:
    other = calibration_profile(scripted, identity={"detector": "scripted", "head": "0123456789ab"})
    other.save(tmp_path)
    with pytest.raises(ConfigurationError, match=r"made for another detector .*head: profile '0123456789ab'"):
        Guard(detector=scripted, calibration=tmp_path)
    with pytest.raises(ConfigurationError, match="detector: profile 'scripted', detector 'lexical'"):
        Guard(detector="lexical", calibration=calibration_profile(scripted))


def test_get_detector_takes_a_calibration(folder: Path, scripted: ScriptedDetector) -> None:
    wrapped = get_detector(scripted, calibration=folder)
    assert isinstance(wrapped, CalibratedDetector) and wrapped.detector is scripted
    assert wrapped.threshold == 0.5  # other attributes are the wrapped detector's
    assert calibrated(wrapped, None) is wrapped
    assert calibrated(wrapped, folder).detector is scripted  # never wrapped twice
    assert get_detector(scripted) is scripted
    lexical = get_detector("lexical", calibration=calibration_profile(get_detector("lexical")))
    assert isinstance(lexical, CalibratedDetector) and lexical.identity() == {"detector": "lexical"}
    with pytest.raises(ConfigurationError, match="made for another detector"):
        get_detector("lexical", calibration=folder)
    assert math.isclose(load_profile(folder).threshold, 0.6)
