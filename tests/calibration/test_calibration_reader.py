"""``calibrate --reader``: the reading model goes to a detector that reads (its registry entry says
so), and is refused, before anything is generated, for one that does not."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.testing import ScriptedChatModel

from .conftest import IdentifiedDetector, calibrate_args

runner = CliRunner()


def test_the_reader_goes_to_a_detector_that_reads(
    tmp_path: Path, corpus: Path, llm: ScriptedChatModel, detector: IdentifiedDetector, reading_detector
) -> None:
    specs = reading_detector("calib-reading", lambda: detector)
    args = calibrate_args(corpus, tmp_path / "out", "--reader", "local:mine", detector="calib-reading")
    result = runner.invoke(app, [*args, "--sample", "5", "--max-false-refusals", "0.2", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert specs == ["local:mine"]


def test_a_reader_for_a_detector_that_does_not_read_exits_2(
    tmp_path: Path, corpus: Path, no_llm: ScriptedChatModel, detector: IdentifiedDetector
) -> None:
    args = calibrate_args(corpus, tmp_path / "out", "--reader", "local:mine", llm="nollm")
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "detector 'calib-scripted' reads with no model: it takes no reader" in result.output
    assert not (tmp_path / "out" / "generation").exists()
