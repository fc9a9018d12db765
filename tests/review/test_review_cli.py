"""``scopeguard review DIR`` picks the page from the folder and, on a calibration folder, passes the
calibration package's callables bound to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import scopeguard.calibration
import scopeguard.review.server
from scopeguard.cli import app


class _Stopped:
    """A server that stops at once, as on Ctrl-C."""

    server_address = ("127.0.0.1", 8765)

    def serve_forever(self) -> None:
        raise KeyboardInterrupt

    def server_close(self) -> None:
        pass


@pytest.fixture()
def made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, dict[str, Any]]]:
    calls: list[tuple[Path, dict[str, Any]]] = []

    def fake_make_server(folder: Path, **kwargs: Any) -> _Stopped:
        calls.append((folder, kwargs))
        return _Stopped()

    monkeypatch.setattr(scopeguard.review.server, "make_server", fake_make_server)
    return calls


def test_help_names_both_kinds_of_folder() -> None:
    result = CliRunner().invoke(app, ["review", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "dataset folder" in text and "calibration folder" in text
    assert "to_label.jsonl" in text and "labels.jsonl" in text and "Backspace" in text


def test_a_calibration_folder_gets_the_calibration_callables(
    calibration_dir: Path, made: list[tuple[Path, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, Path]] = []

    def label_estimate(folder: Path) -> dict[str, Any]:
        seen.append(("estimate", folder))
        return {"text": "threshold 0.71"}

    def update_profile(folder: Path) -> str:
        seen.append(("profile", folder))
        return "profile.json written"

    monkeypatch.setattr(scopeguard.calibration, "label_estimate", label_estimate, raising=False)
    monkeypatch.setattr(scopeguard.calibration, "update_profile", update_profile, raising=False)
    result = CliRunner().invoke(app, ["review", str(calibration_dir)])
    assert result.exit_code == 0, result.output
    assert "questions chosen in" in result.output
    ((folder, kwargs),) = made
    assert folder == calibration_dir
    assert kwargs["estimate"]() == {"text": "threshold 0.71"}
    assert kwargs["on_complete"]() == "profile.json written"
    assert seen == [("estimate", calibration_dir), ("profile", calibration_dir)]


def test_without_the_calibration_callables_labelling_still_runs(
    calibration_dir: Path, made: list[tuple[Path, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(scopeguard.calibration, "label_estimate", raising=False)
    monkeypatch.delattr(scopeguard.calibration, "update_profile", raising=False)
    result = CliRunner().invoke(app, ["review", str(calibration_dir)])
    assert result.exit_code == 0, result.output
    ((_, kwargs),) = made
    assert kwargs["estimate"] is None and kwargs["on_complete"] is None
    assert "no label_estimate" in result.output and "no update_profile" in result.output


def test_a_dataset_folder_gets_no_calibration_callables(
    review_dir: Path, made: list[tuple[Path, dict[str, Any]]]
) -> None:
    result = CliRunner().invoke(app, ["review", str(review_dir), "--annotator", "kim"])
    assert result.exit_code == 0, result.output
    assert f"Reviewing {review_dir} as kim" in result.output
    ((_, kwargs),) = made
    assert kwargs == {"annotator": "kim", "host": "127.0.0.1", "port": 8765}


def test_a_malformed_to_label_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "to_label.jsonl").write_text('{"id": "q1", "question": "Why?"}\n')
    result = CliRunner().invoke(app, ["review", str(tmp_path), "--port", "0"])
    assert result.exit_code == 2
    assert "to_label.jsonl:1: 'documents' must be a non-empty list of chunks" in result.output
