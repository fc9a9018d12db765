"""The Table-2 sampler: N verdicts per class, reproducible by seed, written for a manual check."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli import app
from scopeguard.errors import ConfigurationError
from scopeguard.verification import (
    Evidence,
    VerificationResult,
    check_summary,
    sample_for_check,
    write_check_sample,
)

SIZES = {"supported": 7, "contradicted": 3, "not_related": 2, "unknown": 4}


def results() -> list[VerificationResult]:
    out = []
    for verdict, n in SIZES.items():
        for i in range(n):
            out.append(
                VerificationResult(
                    id=f"{verdict}-{i}",
                    question=f"question {verdict} {i}?",
                    answer="an answer",
                    verdict=verdict,  # type: ignore[arg-type]
                    compared="the reader's answer",
                    evidence=(Evidence(id="p1", text="the top passage", score=1.0, rank=1),),
                )
            )
    return out


def counts(items: list) -> dict[str, int]:  # type: ignore[type-arg]
    out: dict[str, int] = {}
    for item in items:
        out[item.predicted] = out.get(item.predicted, 0) + 1
    return out


def test_per_class_counts_and_all_of_a_small_class() -> None:
    items = sample_for_check(results(), per_class=2, seed=0)
    assert counts(items) == {"Yes": 2, "No": 2, "Not Related": 2}
    assert [i.predicted for i in items] == ["Yes", "Yes", "No", "No", "Not Related", "Not Related"]
    assert all(i.id.startswith(i.verdict) for i in items)
    assert items[0].top_passage == "the top passage" and items[0].compared == "the reader's answer"
    assert all(i.correct is None for i in items)
    assert counts(sample_for_check(results(), per_class=5)) == {"Yes": 5, "No": 3, "Not Related": 2}
    with pytest.raises(ConfigurationError, match="per_class"):
        sample_for_check(results(), per_class=0)


def test_the_seed_fixes_the_draw_whatever_the_order() -> None:
    rows = results()
    first = [i.id for i in sample_for_check(rows, per_class=3, seed=7)]
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    assert [i.id for i in sample_for_check(shuffled, per_class=3, seed=7)] == first
    others = {tuple(i.id for i in sample_for_check(rows, per_class=3, seed=s)) for s in range(10)}
    assert len(others) > 1  # seeds draw different samples


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_written_sample_round_trips_into_table_2(tmp_path: Path, suffix: str) -> None:
    items = sample_for_check(results(), per_class=2, seed=0)
    path = write_check_sample(items, tmp_path / f"sample{suffix}")
    assert check_summary(path) == {
        c: {"correct": 0, "incorrect": 0, "unchecked": 2} for c in ("Yes", "No", "Not Related")
    }
    filled = [item.model_copy(update={"correct": n % 2 == 0}) for n, item in enumerate(items)]
    write_check_sample(filled, path)
    assert check_summary(path)["Yes"] == {"correct": 1, "incorrect": 1, "unchecked": 0}


def test_cli_verify_sample(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(
        "".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in results()), encoding="utf-8"
    )
    out = tmp_path / "check.csv"
    got = CliRunner().invoke(app, ["verify-sample", str(run), "--out", str(out), "--per-class", "2"])
    assert got.exit_code == 0, got.output
    assert "6 results (Yes 2, No 2, Not Related 2)" in got.output
    assert out.read_text(encoding="utf-8").splitlines()[0].startswith("predicted,verdict,id,")
    again = tmp_path / "again.csv"
    CliRunner().invoke(app, ["verify-sample", str(run), "--out", str(again), "--per-class", "2"])
    assert again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
