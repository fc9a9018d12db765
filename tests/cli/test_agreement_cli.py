"""``scopeguard agreement``: the defusion judge against reviewers (a run), people against people
(a dataset); exit codes 0 / 1 (labels that could not be compared) / 2 (cannot run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli import app
from scopeguard.review import LabelStore
from tests.evaluation.reviewed_run import make_reviewed_run


def test_run_folder_prints_the_table_and_exits_1_for_an_uncompared_label(tmp_path: Path) -> None:
    run, _ = make_reviewed_run(tmp_path)
    result = CliRunner().invoke(app, ["agreement", str(run)])
    assert result.exit_code == 1, result.output
    assert "| alice | 3 | 0.667 | 0.400 |" in result.output
    assert "| all labels | 6 | 0.500 | 0.000 |" in result.output
    assert "Group agreement accuracy: 0.500 (n=2" in result.output
    assert "skipped alice / q4" in result.output
    assert "1 of 7 human labels failed" in result.output


def test_label_file_with_run_as_json_exits_0(tmp_path: Path) -> None:
    run, data = make_reviewed_run(tmp_path)
    result = CliRunner().invoke(
        app, ["agreement", str(data / "reviews" / "bob.jsonl"), "--run", str(run), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["reviewers"] == ["bob"] and report["judge_accuracy"] == pytest.approx(1 / 3)


def test_label_file_without_run_cannot_run(tmp_path: Path) -> None:
    _, data = make_reviewed_run(tmp_path)
    result = CliRunner().invoke(app, ["agreement", str(data / "reviews" / "bob.jsonl")])
    assert result.exit_code == 2 and "--run RUN" in result.output


def test_dataset_folder_keeps_the_scope_label_report(tmp_path: Path) -> None:
    _, data = make_reviewed_run(tmp_path)
    for name, label in (("alice", "out_of_scope"), ("bob", "in_scope")):
        LabelStore(data, name).set("q1", "scope", label)
    result = CliRunner().invoke(app, ["agreement", str(data), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["annotators"] == ["alice", "bob"] and report["pairs"][0]["observed_agreement"] == 0.0
