"""``scopeguard calibrate`` end to end on an invented corpus: generation, reading, the profile, the
report card and the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.calibration._choose import GENERATED_SHIFT, GENERATED_SHIFT_SET, shifted
from scopeguard.cli._app import app
from scopeguard.data import load_dataset
from scopeguard.detection.profile import CalibratedDetector, load_profile
from scopeguard.testing import ScriptedChatModel

from .conftest import IdentifiedDetector, calibrate_args

runner = CliRunner()


def _scores(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]


def test_calibrate_end_to_end(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    out = tmp_path / "calib"
    args = calibrate_args(corpus, str(out))
    result = runner.invoke(app, [*args, "--sample", "5", "--max-false-refusals", "0.2", "--no-progress"])
    assert result.exit_code == 0, result.output
    profile = load_profile(out)
    assert f"calib-scripted at threshold {profile.threshold:.3f}" in result.output
    assert f"profile: {out / 'profile.json'}" in result.output

    # the questions were generated on 5 of the 6 documents, in the generator's run folder
    generated = load_dataset(out / "generation")
    assert len(generated.documents) == 5 and llm.calls
    rows = _scores(out)
    assert len(rows) == len(generated.questions) == detector.calls
    assert {r["id"] for r in rows} == {q.id for q in generated.questions}

    # the threshold meets the budget on the calibration scores (generated in-scope ones moved up by
    # the shift, as they are easier than people's), and the rates count them
    in_scope = [
        shifted(float(r["score"]), GENERATED_SHIFT)  # type: ignore[arg-type]
        for r in rows
        if r["label"] == "in_scope"
    ]
    out_of_scope = [float(r["score"]) for r in rows if r["label"] == "out_of_scope"]  # type: ignore[arg-type]
    refused = sum(s >= profile.threshold for s in in_scope)
    assert refused / len(in_scope) <= profile.budget == 0.2
    assert (profile.false_refusals.k, profile.false_refusals.n) == (refused, len(in_scope))
    caught = sum(s >= profile.threshold for s in out_of_scope)
    assert (profile.caught.k, profile.caught.n) == (caught, len(out_of_scope))
    # just above an in-scope score: one step lower and that question would be refused too
    below = max(s for s in in_scope if s < profile.threshold)
    assert profile.threshold == math.nextafter(below, math.inf)
    assert profile.false_refusals.low <= profile.false_refusals.value <= profile.false_refusals.high  # type: ignore[operator]

    # hedge band from the default hedge budget min(2 * 0.2, 0.5)
    assert profile.hedge_budget == pytest.approx(0.4)
    assert profile.hedge_from is not None and profile.hedge_from <= profile.threshold
    hedged = sum(profile.hedge_from <= s < profile.threshold for s in in_scope)
    assert profile.hedged is not None and profile.hedged.k == hedged
    assert (refused + hedged) / len(in_scope) <= 0.4

    # what the profile records
    assert profile.detector == "calib-scripted"
    assert profile.identity == {"detector": "calib-scripted", "head": "h1"}
    assert set(profile.data) == {"corpus", "generated"} and all(len(v) == 64 for v in profile.data.values())
    assert "fake-calib" in profile.sources[0] and "5 of the 6 documents" in profile.sources[0]
    assert profile.machine and "cores" in profile.machine
    assert profile.created[:4].isdigit() and profile.scopeguard_version
    CalibratedDetector(detector, out)  # made for this detector: accepted


def test_report_card(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    out = tmp_path / "calib"
    args = calibrate_args(corpus, str(out))
    result = runner.invoke(app, [*args, "--sample", "6", "--no-progress"])
    assert result.exit_code == 0, result.output
    profile = load_profile(out)
    report = (out / "report.md").read_text()
    assert "`calib-scripted`" in report and "head=h1" in report
    assert f"{profile.threshold:.4f}" in report and f"{profile.hedge_from:.4f}" in report
    assert str(profile.false_refusals) in report and str(profile.caught) in report
    assert "## How far to trust it" in report
    assert "Generated questions are easier" in report and "Recalibrate when the corpus changes" in report
    assert f"n={profile.false_refusals.n}" in report
    assert profile.data["corpus"] in report and profile.sources[0] in report
    # the table of budgets: 18 in-scope questions are too few for 0.05 (19 needed), enough for the rest
    in_scope = profile.false_refusals.n
    assert in_scope == 18
    assert f"| 0.05 | needs 19 in-scope questions, got {in_scope} |" in report
    for budget in ("0.1", "0.15", "0.2"):
        assert f"\n| {budget} | 0." in report
    assert f"| 0.1 | {profile.threshold:.4f} | {profile.false_refusals} | {profile.caught} |" in report


def test_plot_written_when_matplotlib_is_installed(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs scopeguard[plots]")
    out = tmp_path / "calib"
    result = runner.invoke(
        app,
        calibrate_args(corpus, str(out), "--no-progress"),
    )
    assert result.exit_code == 0, result.output
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![scores and the false-refusal trade-off](report.png)" in (out / "report.md").read_text()


def test_no_plot_without_matplotlib(
    tmp_path: Path,
    corpus: Path,
    llm: ScriptedChatModel,
    detector: IdentifiedDetector,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scopeguard.calibration import _plot
    from scopeguard.errors import MissingDependencyError

    def missing(module: str, **kw: str) -> None:
        raise MissingDependencyError(module, kw["extra"], kw["feature"])

    monkeypatch.setattr(_plot, "require", missing)
    out = tmp_path / "calib"
    result = runner.invoke(
        app,
        calibrate_args(corpus, str(out), "--no-progress"),
    )
    assert result.exit_code == 0, result.output
    assert not (out / "report.png").exists()
    report = (out / "report.md").read_text()
    assert "The plot was skipped" in report and "pip install 'scopeguard[plots]'" in report
    assert "no plot" in result.output


def test_no_hedge(tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector) -> None:
    out = tmp_path / "calib"
    result = runner.invoke(
        app,
        calibrate_args(corpus, str(out), "--no-hedge", "--no-progress"),
    )
    assert result.exit_code == 0, result.output
    profile = load_profile(out)
    assert profile.hedge_from is None and profile.hedge_budget is None and profile.hedged is None
    assert "| hedge band | none |" in (out / "report.md").read_text()


def test_generated_questions_are_moved_by_the_shift_and_labelled_ones_are_not(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    """With --generated-shift 0 the threshold sits just above a raw in-scope score; with the
    default it sits higher (more conservative), and the profile notes the shift."""
    opts = ("--sample", "5", "--max-false-refusals", "0.2", "--no-progress")
    raw = runner.invoke(app, calibrate_args(corpus, tmp_path / "raw", *opts, "--generated-shift", "0"))
    assert raw.exit_code == 0, raw.output
    plain = load_profile(tmp_path / "raw")
    scores = [float(r["score"]) for r in _scores(tmp_path / "raw") if r["label"] == "in_scope"]  # type: ignore[arg-type]
    assert plain.threshold == math.nextafter(max(s for s in scores if s < plain.threshold), math.inf)
    assert not any("logits" in n for n in plain.notes)
    moved = runner.invoke(app, calibrate_args(corpus, tmp_path / "moved", *opts))
    assert moved.exit_code == 0, moved.output
    profile = load_profile(tmp_path / "moved")
    assert profile.threshold > plain.threshold
    assert any(f"moved up {GENERATED_SHIFT:g} logits" in n for n in profile.notes)


def test_a_set_reading_detector_gets_the_shift_learned_on_set_reads_unless_one_is_given(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.detection.detectors import registry as detector_registry

    from .conftest import fake_score

    class SetReading(IdentifiedDetector):
        def identity(self) -> dict[str, str]:
            return {**super().identity(), "read": "set"}

    det = SetReading(fake_score, name="calib-scripted")
    monkeypatch.setitem(detector_registry._DETECTORS, "calib-scripted", lambda **_: det)
    opts = ("--sample", "5", "--max-false-refusals", "0.2", "--no-progress")
    result = runner.invoke(app, calibrate_args(corpus, tmp_path / "set", *opts))
    assert result.exit_code == 0, result.output
    notes = load_profile(tmp_path / "set").notes
    assert GENERATED_SHIFT_SET != GENERATED_SHIFT
    assert any(f"moved up {GENERATED_SHIFT_SET:g} logits" in n for n in notes)
    assert "the shift is the one learned on such reads" in (tmp_path / "set" / "report.md").read_text()
    given = runner.invoke(app, calibrate_args(corpus, tmp_path / "given", *opts, "--generated-shift", "0.58"))
    assert given.exit_code == 0, given.output
    assert any("moved up 0.58 logits" in n for n in load_profile(tmp_path / "given").notes)


def test_read_set_builds_the_detector_in_set_mode_and_its_profile_names_it(
    tmp_path: Path,
    corpus: Path,
    llm: ScriptedChatModel,
    detector: IdentifiedDetector,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scopeguard.detection.detectors import registry as detector_registry

    from .conftest import fake_score

    class Reading(IdentifiedDetector):
        def __init__(self, read: str) -> None:
            super().__init__(fake_score, name="calib-reading")
            self.read = read

        def identity(self) -> dict[str, str]:
            return {**super().identity(), **({} if self.read == "passages" else {"read": self.read})}

    def make(read: str = "passages") -> Reading:
        return Reading(read)

    monkeypatch.setitem(detector_registry._DETECTORS, "calib-reading", make)
    opts = ("--sample", "5", "--max-false-refusals", "0.2", "--no-progress")
    args = [
        a if a != "calib-scripted" else "calib-reading"
        for a in calibrate_args(corpus, tmp_path / "set", *opts)
    ]
    result = runner.invoke(app, [*args, "--read", "set"])
    assert result.exit_code == 0, result.output
    assert load_profile(tmp_path / "set").identity == {
        "detector": "calib-reading",
        "head": "h1",
        "read": "set",
    }
    # a detector without a read mode is told so before anything is generated
    refused = runner.invoke(app, [*calibrate_args(corpus, tmp_path / "no", *opts), "--read", "set"])
    assert refused.exit_code == 2 and "--read applies to the default detector" in refused.output
    assert not (tmp_path / "no" / "generation").exists()


def test_a_read_mode_for_a_detector_given_built_is_refused(tmp_path: Path, corpus: Path) -> None:
    from scopeguard.calibration import calibrate
    from scopeguard.errors import ConfigurationError

    from .conftest import fake_score

    with pytest.raises(ConfigurationError, match=r"options \(read\) apply to a detector built by name"):
        calibrate(corpus, tmp_path / "built", detector=IdentifiedDetector(fake_score), read="set")
