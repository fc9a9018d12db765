"""``scopeguard eval-detector`` on a tiny invented dataset (real detectors, no dataset text)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.testing import calibration_profile

runner = CliRunner()

DOCS = [
    {
        "doc_id": "lib",
        "text": "The town of Brindlewick opened a new public library on Saturday. "
        "Mayor Elena Torvik said the building cost 12 million dollars, paid by a regional grant.",
    },
    {
        "doc_id": "ferry",
        "text": "A storm closed the harbour of Kessling for two days and delayed the ferry to the islands. "
        "The harbour master said repairs to the pier would take a week.",
    },
]
QUESTIONS = [
    ("q1", "lib", "How much did the new Brindlewick library building cost?", "in_scope"),
    ("q2", "lib", "Which architecture firm designed the library's solar roof panels?", "out_of_scope"),
    ("q3", "ferry", "How long did the storm close the Kessling harbour?", "in_scope"),
    ("q4", "ferry", "What compensation did passengers receive from the insurance company?", "out_of_scope"),
]


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "documents.jsonl").write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
    rows = [{"id": i, "doc_id": d, "question": q, "label": y} for i, d, q, y in QUESTIONS]
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return tmp_path


def test_json_output_has_all_metrics(tiny: Path) -> None:
    res = runner.invoke(app, ["eval-detector", str(tiny), "--detector", "lexical", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for key in (
        "n",
        "accuracy",
        "precision_oos",
        "recall_oos",
        "f1_oos",
        "false_refusal_rate",
        "auroc",
        "unknown_rate",
        "latency_ms_p50",
        "latency_ms_p95",
        "escalated_share",
        "recall_oos_at_fr10",
        "hedged_share",
    ):
        assert key in out
    assert out["n"] == 4 and out["detector"] == "lexical" and out["calibration"] is None
    assert out["recall_oos_at_fr10"] == 1.0  # separable: both caught without a false refusal
    assert out["accuracy"] == 1.0 and out["auroc"] == 1.0


def test_table_output_and_limit(tiny: Path) -> None:
    res = runner.invoke(app, ["eval-detector", str(tiny), "-d", "lexical", "--limit", "2", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "accuracy" in res.stdout and "latency p95 (ms)" in res.stdout
    assert re.search(r"questions +2\n", res.stdout) and "false refusals (in scope)" in res.stdout
    assert "caught at <=10% false refusals" in res.stdout and "hedged" not in res.stdout


def test_one_class_auroc_is_null_in_json(tiny: Path) -> None:
    res = runner.invoke(app, ["eval-detector", str(tiny), "-d", "lexical", "--limit", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["auroc"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--detector", "nope"], "unknown detector 'nope'; valid names:"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["-d", "lexical", "--threads", "0"], "--threads must be at least 1"),
        (["-d", "fast", "--model", "/no/such/head.json"], "fast head not found"),
    ],
)
def test_bad_arguments_give_one_line_errors(tiny: Path, args: list[str], message: str) -> None:
    if "fast" in args:
        pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    res = runner.invoke(app, ["eval-detector", str(tiny), *args])
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output


def test_several_datasets_and_per_question_file(tiny: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for name in ("documents.jsonl", "questions.jsonl"):
        (other / name).write_text((tiny / name).read_text())
    out = tmp_path / "pq.jsonl"
    args = ["eval-detector", str(tiny), str(other), "-d", "lexical", "--json", "--per-question", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    tables = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [t["dataset"] for t in tables] == [str(tiny), str(other)]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 8 and {r["dataset"] for r in rows} == {tiny.name, "other"}
    first = rows[0]
    assert (
        first["id"] == "q1"
        and first["label"] == "in_scope"
        and first["predicted"] in ("in_scope", "out_of_scope")
    )
    for key in ("score", "stage", "uncovered", "latency_ms", "escalated", "correct"):
        assert key in first
    # a bad second folder is reported before any detector runs
    res = runner.invoke(app, ["eval-detector", str(tiny), str(tmp_path / "nowhere"), "-d", "lexical"])
    assert res.exit_code == 2 and "dataset folder not found" in res.output


def test_missing_dataset_folder(tmp_path: Path) -> None:
    res = runner.invoke(app, ["eval-detector", str(tmp_path / "nowhere"), "-d", "lexical"])
    assert res.exit_code == 2
    assert "dataset folder not found" in res.output


@pytest.mark.slow
@pytest.mark.integration
def test_default_detector_end_to_end(tiny: Path) -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    res = runner.invoke(app, ["eval-detector", str(tiny), "--json", "--threads", "1"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["detector"] == "default" and out["n"] == 4
    assert out["accuracy"] >= 0.75
    assert 0.0 <= out["escalated_share"] <= 1.0


def test_llm_is_refused_for_a_detector_that_reads_no_llm(tiny: Path) -> None:
    res = runner.invoke(app, ["eval-detector", str(tiny), "--detector", "lexical", "--llm", "local:smollm2"])
    assert res.exit_code == 2
    assert "--llm does not apply to --detector lexical" in res.output


def test_reader_goes_to_a_detector_that_reads_only(tiny: Path, reading_detector) -> None:
    from scopeguard.detection.detectors.logprob import LogProbDetector
    from scopeguard.testing import ScriptedVerdictScorer

    # the spec stands for a scripted reading model
    specs = reading_detector("logprob", lambda: LogProbDetector(reader=ScriptedVerdictScorer(lambda p: 3.0)))
    args = ["eval-detector", str(tiny), "--detector", "logprob", "--reader", "openai:mine", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == 4 and specs == ["openai:mine"]
    res = runner.invoke(app, ["eval-detector", str(tiny), "--detector", "lexical", "--reader", "local"])
    assert res.exit_code == 2 and "detector 'lexical' reads with no model" in res.output
    res = runner.invoke(app, ["eval-detector", str(tiny), "--detector", "logprob", "--llm", "local"])
    assert res.exit_code == 2 and "takes its reading model as --reader SPEC" in res.output


def test_calibration_relabels_and_is_named(tiny: Path, tmp_path: Path) -> None:
    folder = calibration_profile("lexical", threshold=0.99, hedge_from=0.01, folder=tmp_path / "cal")
    pq = tmp_path / "pq.jsonl"
    args = ["eval-detector", str(tiny), "-d", "lexical", "--calibration", str(folder), "--no-progress"]
    res = runner.invoke(app, [*args, "--per-question", str(pq)])
    assert res.exit_code == 0, res.output
    assert f"calibration {folder / 'profile.json'}: lexical at threshold 0.990" in res.stdout
    assert "hedged (calibration)" in res.stdout and "caught at <=10% false refusals" in res.stdout
    rows = {r["id"]: r for r in map(json.loads, pq.read_text().splitlines())}
    # lexical calls q2 out of scope at its own threshold (score 0.86); under 0.99 it is in scope, hedged
    assert (rows["q2"]["predicted"], rows["q2"]["hedge"], rows["q2"]["correct"]) == ("in_scope", True, False)
    assert (rows["q4"]["predicted"], rows["q4"]["hedge"]) == ("out_of_scope", False)  # score 1.0
    assert (rows["q1"]["predicted"], rows["q1"]["hedge"]) == ("in_scope", False)  # score 0.0
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["calibration"] == str(folder) and out["false_refusal_rate"] == 0.0
    assert out["recall_oos"] == 0.5 and out["recall_oos_at_fr10"] == 1.0  # the threshold, not the scores
    assert out["hedged_share"] == 0.5  # q2 and q3 (0.4)
    assert "calibration " in res.stderr  # the profile's line, off stdout's JSON lines


def test_calibration_for_another_detector_exits_2(tiny: Path, tmp_path: Path) -> None:
    folder = calibration_profile("fast", folder=tmp_path / "cal")
    res = runner.invoke(app, ["eval-detector", str(tiny), "-d", "lexical", "--calibration", str(folder)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "made for another detector (detector: profile 'fast', detector 'lexical')" in res.output
    res = runner.invoke(app, ["eval-detector", str(tiny), "--calibration", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and "no calibration profile at" in res.output
