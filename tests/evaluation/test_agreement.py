"""AutoDefuseEval against people: accuracy, kappa and group agreement (ELOQ 3.4, Table 3)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scopeguard.errors import InputError
from scopeguard.evaluation import defusion_agreement
from tests.evaluation.reviewed_run import make_reviewed_run


def test_judge_against_reviewers(tmp_path: Path) -> None:
    run, _ = make_reviewed_run(tmp_path)
    report = defusion_agreement(run)
    assert report.reviewers == ("alice", "bob") and report.labels == 7 and report.compared == 6
    alice, bob = report.by_reviewer
    # alice: judge right on q1, q2, wrong on q3; kappa = (2/3 - 4/9) / (1 - 4/9) = 0.4
    assert (alice.n, alice.judge_accuracy, alice.judge_kappa) == (3, pytest.approx(2 / 3), pytest.approx(0.4))
    assert (bob.n, bob.judge_accuracy) == (3, pytest.approx(1 / 3))
    # pooled: 3 of 6; judge yes 4 / no 2, people yes 3 / no 3 -> expected agreement 0.5, kappa 0
    assert report.judge_accuracy == pytest.approx(0.5) and report.judge_kappa == pytest.approx(0.0)
    # both reviewers agree on q1 (judge right) and q3 (judge wrong); they disagree on q2
    assert report.group_agreed == 2 and report.group_agreement_accuracy == pytest.approx(0.5)
    (pair,) = report.pairs
    assert (pair.n, pair.observed_agreement) == (3, pytest.approx(2 / 3))
    (skipped,) = report.skipped
    assert (skipped.reviewer, skipped.question_id) == ("alice", "q4") and "unknown" in skipped.reason
    assert report.metrics[report.primary_metric] == report.judge_accuracy


def test_one_label_file_and_prompt_filter(tmp_path: Path) -> None:
    run, data = make_reviewed_run(tmp_path)
    bob = defusion_agreement(run, data / "reviews" / "bob.jsonl")
    assert bob.reviewers == ("bob",) and bob.compared == 3 and not bob.skipped and not bob.pairs
    assert math.isnan(bob.group_agreement_accuracy)
    # the two-shot responses are not the ones the reviewers saw: nothing to compare
    other = defusion_agreement(run, data / "reviews" / "bob.jsonl", prompt="two-shot")
    assert other.compared == 0 and len(other.skipped) == 3
    assert all("text the reviewer saw" in s.reason for s in other.skipped)


def test_without_defused_labels_is_a_clear_error(tmp_path: Path) -> None:
    run, _ = make_reviewed_run(tmp_path)
    empty = tmp_path / "empty_reviews"
    empty.mkdir()
    with pytest.raises(InputError, match="no 'defused' labels"):
        defusion_agreement(run, empty)
