"""``scopeguard eval-detector --retrieve K``: a scripted detector with the bm25 retriever on a tiny
invented dataset, the one-line errors, and the real default retriever (MiniLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.detection.detectors import register_detector
from scopeguard.detection.detectors import registry as detector_registry
from scopeguard.testing import ScriptedDetector, calibration_profile
from tests.evaluation.retrieved_data import SCORES, write_dataset

runner = CliRunner()


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "tiny")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detector_registry, "_DETECTORS", dict(detector_registry._DETECTORS))
    register_detector("scripted", lambda: ScriptedDetector(SCORES))


@pytest.mark.usefixtures("scripted")
def test_json_and_per_question_rows(tiny: Path, tmp_path: Path) -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    pq = tmp_path / "pq.jsonl"
    args = ["eval-detector", str(tiny), "-d", "scripted", "--retrieve", "1", "--retriever", "bm25"]
    res = runner.invoke(app, [*args, "--json", "--per-question", str(pq)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["retriever"], out["k"], out["n"], out["answerable"]) == ("bm25", 1.0, 5.0, 3.0)
    assert out["recall_at_k"] == pytest.approx(2 / 3) and out["answerable_not_retrieved"] == 1.0
    assert out["in_scope"] == 2.0 and out["false_refusals_at_threshold"] == 0.0
    # at 0.5 q2 (0.9, not retrieved) and q4 (0.7) are caught, q5 (0.3) is not; in hindsight 0.3 catches all
    assert out["caught_at_threshold"] == pytest.approx(2 / 3) and out["recall_oos_at_fr10"] == 1.0
    assert "caught_at_profile" not in out
    rows = {r["id"]: r for r in map(json.loads, pq.read_text().splitlines())}
    assert rows["q2"]["retrieved"] == ["lib"] and rows["q2"]["gold_retrieved"] is False
    assert (rows["q2"]["label"], rows["q2"]["truth"], rows["q2"]["correct"]) == (
        "in_scope",
        "out_of_scope",
        True,
    )
    assert rows["q1"]["retrieved"] == ["lib"] and rows["q1"]["gold_retrieved"] is True

    res = runner.invoke(app, [*args[:-4], "--retrieve", "3", "--retriever", "bm25", "--limit", "2", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n"] == 2.0 and out["recall_at_k"] == 1.0 and out["in_scope"] == 2.0
    assert out["false_refusals_at_threshold"] == 0.5  # q2 (0.9) is now in scope and refused


@pytest.mark.usefixtures("scripted")
def test_table_with_a_profile(tiny: Path, tmp_path: Path) -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    folder = calibration_profile("scripted", threshold=0.95, hedge_from=None, folder=tmp_path / "cal")
    args = ["eval-detector", str(tiny), "-d", "scripted", "--retrieve", "1", "--retriever", "bm25"]
    res = runner.invoke(app, [*args, "--calibration", str(folder), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "top 1 of bm25" in res.stdout
    lines = {line.rsplit(None, 1)[0].strip(): line.rsplit(None, 1)[1] for line in res.stdout.splitlines()[2:]}
    assert lines["recall@K (answerable)"] == "0.667" and lines["in scope (answerable, retrieved)"] == "2"
    assert lines["caught at the threshold"] == "0.667" and lines["caught at the profile"] == "0.000"
    assert lines["false refusals at the profile"] == "0.000"


@pytest.mark.usefixtures("scripted")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--retrieve", "0"], "--retrieve must be at least 1, got 0"),
        (["--retrieve", "2", "--retriever", "nope"], "unknown retriever 'nope'; valid: bge, bm25,"),
        (["--retriever", "bm25"], "--retriever needs --retrieve K"),
    ],
)
def test_bad_arguments_give_one_line_errors(tiny: Path, args: list[str], message: str) -> None:
    res = runner.invoke(app, ["eval-detector", str(tiny), "-d", "scripted", *args])
    assert res.exit_code == 2
    assert message in res.output and len(res.output.strip().splitlines()) == 1
    assert "Traceback" not in res.output


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.usefixtures("scripted")
def test_the_default_retriever_is_the_real_minilm(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    pytest.importorskip("faiss", reason="needs scopeguard[retrieval]")
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))  # embed for real, not from a cache
    pq = tmp_path / "pq.jsonl"
    args = [
        "eval-detector",
        str(tiny),
        "-d",
        "scripted",
        "--retrieve",
        "2",
        "--json",
        "--per-question",
        str(pq),
    ]
    res = runner.invoke(app, [*args, "--no-progress"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["retriever"] == "minilm" and out["k"] == 2.0 and out["n"] == 5.0
    rows = {r["id"]: r for r in map(json.loads, pq.read_text().splitlines())}
    assert all(len(r["retrieved"]) == 2 for r in rows.values())
    # questions worded after their own document find it
    for qid in ("q1", "q3", "q4"):
        assert rows[qid]["gold_retrieved"] is True, rows[qid]
    assert out["recall_at_k"] == sum(rows[q]["gold_retrieved"] for q in ("q1", "q2", "q3")) / 3
    assert list((tmp_path / "cache" / "embeddings").glob("*/shard-*.npz"))
