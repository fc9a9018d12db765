"""Class distribution (Table 1) and agreement matrices (Tables 3-4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopeguard.errors import DatasetError, InputError
from scopeguard.verification import (
    VerificationResult,
    agreement_markdown,
    agreement_matrix,
    class_distribution,
    distribution_markdown,
    read_results,
    write_run_report,
)


def run(*verdicts: str) -> list[VerificationResult]:
    return [
        VerificationResult(id=f"q{i}", question=f"question {i}?", answer="a", verdict=v)  # type: ignore[arg-type]
        for i, v in enumerate(verdicts)
    ]


def test_class_distribution() -> None:
    d = class_distribution(run("supported", "supported", "contradicted", "not_related"))
    assert d.n == 4
    assert d.counts == {"supported": 2, "contradicted": 1, "not_related": 1, "unknown": 0}
    assert d.shares["supported"] == 0.5
    md = distribution_markdown({"bm25": d})
    assert "| Yes | 2 (50.0%) |" in md and "| No | 1 (25.0%) |" in md and "| Not Related | 1 (25.0%) |" in md
    assert "Unparsed" not in md


def test_agreement_matrix_counts_and_metrics() -> None:
    a = run("supported", "supported", "contradicted", "not_related", "supported")
    b = run("supported", "contradicted", "contradicted", "supported")  # q4 only in a
    m = agreement_matrix(a, b, name_a="bm25", name_b="dense")
    assert m.n == 4 and m.only_a == 1 and m.only_b == 0
    assert m.counts["supported"]["supported"] == 1
    assert m.counts["supported"]["contradicted"] == 1
    assert m.counts["contradicted"]["contradicted"] == 1
    assert m.counts["not_related"]["supported"] == 1
    metrics = m.metrics()
    assert metrics["agreement"] == 0.5 and metrics["changed"] == 2.0 and metrics["n"] == 4.0
    # kappa by hand: p_o = .5; rows (2,1,1), cols (2,2,0) -> p_e = (4+2+0)/16 = .375
    assert metrics["cohen_kappa"] == pytest.approx((0.5 - 0.375) / 0.625)
    md = agreement_markdown(m)
    assert md.splitlines()[0].startswith("| bm25 \\ dense | Yes | No | Not Related |")
    assert "changed: 2" in md and "only in bm25: 1" in md


def test_runs_with_nothing_in_common() -> None:
    a = run("supported")
    b = [VerificationResult(id="other", question="?", answer="a", verdict="supported")]
    with pytest.raises(InputError, match="share no question id"):
        agreement_matrix(a, b)


def test_read_results_and_write_report(tmp_path: Path) -> None:
    last = VerificationResult(id="q1", question="question 1?", answer="a", verdict="not_related", llm_calls=3)
    rows = [*run("supported", "contradicted"), last]
    (tmp_path / "results.jsonl").write_text(
        "".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8"
    )
    got = read_results(tmp_path)
    assert [(r.id, r.verdict) for r in got] == [("q0", "supported"), ("q1", "not_related")]  # last row wins
    report = write_run_report(tmp_path, name="run1")
    assert report["counts"]["not_related"] == 1 and report["n"] == 2 and report["llm_calls"] == 3
    assert json.loads((tmp_path / "report.json").read_text())["run"] == "run1"
    assert "| Not Related | 1 (50.0%) |" in (tmp_path / "report.md").read_text()


def test_read_results_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "q1", "question": "?"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"x.jsonl:1: not a verification result"):
        read_results(path)
