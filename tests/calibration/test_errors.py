"""Bad input is exit code 2 and one clear line, before any model loads or question is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.calibration import CalibrationConfig, calibrate
from scopeguard.cli._app import app
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.testing import ScriptedChatModel

from .conftest import IdentifiedDetector, calibrate_args, fake_score, write_jsonl

runner = CliRunner()


def _one_line(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--max-false-refusals", "0"], "the false-refusal budget must be in (0, 0.5], got 0"),
        (["--max-false-refusals", "0.6"], "the false-refusal budget must be in (0, 0.5], got 0.6"),
        (["--max-false-refusals", "-0.1"], "must be in (0, 0.5]"),
        (["--hedge-budget", "0.7"], "the hedge budget must be in (0, 0.5], got 0.7"),
        (["--hedge-budget", "0.05"], "the hedge budget (0.05) must exceed the false-refusal budget (0.1)"),
        (["--sample", "0"], "sample"),
        (["-d", "nosuchdetector"], "unknown detector 'nosuchdetector'; valid names:"),
    ],
)
def test_bad_options(tmp_path: Path, corpus: Path, options: list[str], message: str) -> None:
    line = _one_line(calibrate_args(corpus, tmp_path / "o", *options, llm=None, detector="default"))
    assert message in line
    assert not (tmp_path / "o").exists()


def test_missing_and_empty_corpus(tmp_path: Path, detector: IdentifiedDetector) -> None:
    line = _one_line(calibrate_args(tmp_path / "nope.jsonl", tmp_path / "o", llm=None))
    assert line == f"error: corpus not found: {tmp_path / 'nope.jsonl'}"
    empty = write_jsonl(tmp_path / "empty" / "documents.jsonl", [])
    line = _one_line(calibrate_args(empty, tmp_path / "o", llm=None))
    assert "has no documents" in line and detector.calls == 0


def test_too_few_in_scope_questions_for_the_budget(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    # 4 documents x 3 in-scope questions = 12: a budget of 0.05 needs 19
    line = _one_line(
        calibrate_args(
            corpus, tmp_path / "o", "--sample", "4", "--max-false-refusals", "0.05", "--no-progress"
        )
    )
    assert line == (
        "error: a false-refusal budget of 0.05 needs at least 19 in-scope questions to calibrate on, "
        "got 12: sample more documents or allow a larger budget"
    )
    assert not (tmp_path / "o" / "profile.json").exists()
    # what was read is kept: a rerun with a larger budget reads nothing again
    again = IdentifiedDetector(fake_score, name="calib-scripted")  # the same identity
    profile = calibrate(corpus, tmp_path / "o", detector=again, llm=llm, sample=4, budget=0.1, progress=False)
    assert again.calls == 0 and profile.false_refusals.n == 12


def test_the_api_validates_settings(tmp_path: Path, corpus: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"budget must be in \(0, 0.5\]"):
        calibrate(corpus, tmp_path / "o", budget=0.9)
    with pytest.raises(ConfigurationError, match="nonsense"):
        calibrate(corpus, tmp_path / "o", nonsense=1)
    with pytest.raises(InputError, match="corpus not found"):
        calibrate(tmp_path / "missing", tmp_path / "o")
    assert CalibrationConfig().hedge_level() == pytest.approx(0.2)
    assert CalibrationConfig(budget=0.3).hedge_level() == 0.5
    assert CalibrationConfig(budget=0.5).hedge_level() is None  # no room above the budget
    assert CalibrationConfig(hedge=False).hedge_level() is None
