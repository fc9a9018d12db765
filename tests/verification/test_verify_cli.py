"""``scopeguard verify`` / ``verify-compare`` end to end with a scripted LLM (invented data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli import app
from scopeguard.data import Dataset, LabeledQuestion, save_dataset
from scopeguard.llm import registry
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document

pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")

DOCS = {
    "harbour": Document(
        id="harbour",
        text=(
            "The Zorbian lighthouse was painted green in 1931. The harbour guild chose the colour. "
            "Guild members meet on Tuesdays. They store rope in the old rope house."
        ),
    ),
    "pies": Document(
        id="pies",
        text=(
            "Marlow pies are baked with quince. They are served cold at the spring fair. "
            "The fair opens at dawn."
        ),
    ),
}
QUESTIONS = (
    LabeledQuestion(
        id="q1", doc_id="harbour", question="What colour is the Zorbian lighthouse?", label="in_scope"
    ),
    LabeledQuestion(id="q2", doc_id="pies", question="What fruit goes into Marlow pies?", label="in_scope"),
    LabeledQuestion(id="q3", doc_id="pies", question="Who invented Marlow pies?", label="out_of_scope"),
    LabeledQuestion(id="q4", doc_id="harbour", question="When do guild members meet?", label="in_scope"),
)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Registers ``scripted:`` LLMs: the classifier says No when the reader ran, else Yes."""
    prompts: list[str] = []

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        if "act as a classifier" in prompt:
            return "No" if "Answer2: Extracted" in prompt else "Yes"
        if "extracting answers" in prompt:
            return "Extracted: green."
        return "Green." if "lighthouse" in prompt else "Quince, served cold at the fair."

    monkeypatch.setitem(registry._BACKENDS, "scripted", lambda arg, **kw: ScriptedChatModel(reply))
    return prompts


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return save_dataset(Dataset(documents=DOCS, questions=QUESTIONS), tmp_path / "ds")


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_verify_runs_resumes_and_compares(tmp_path: Path, dataset: Path, scripted: list[str]) -> None:
    run_a = tmp_path / "plain"
    out = invoke("verify", str(dataset), "--corpus", str(dataset), "--llm", "scripted", "--out", str(run_a),
                 "--limit", "2", "--k", "2")  # fmt: skip
    assert "| Yes | 2 (100.0%) |" in out
    rows = [json.loads(line) for line in (run_a / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2"]  # in-scope questions, first 2
    assert rows[0]["evidence"][0]["id"] == "harbour#p0" and 1 <= len(rows[0]["evidence"]) <= 2
    assert rows[0]["query"] == "What colour is the Zorbian lighthouse? Green."
    assert json.loads((run_a / "report.json").read_text())["counts"]["supported"] == 2
    assert (run_a / "report.md").is_file() and json.loads((run_a / "config.json").read_text())["k"] == 2
    n_prompts = len(scripted)
    assert n_prompts == 4

    # a larger limit resumes: only q4 is new; a finished run makes no LLM call
    invoke(
        "verify", str(dataset), "--corpus", str(dataset), "--llm", "scripted", "--out", str(run_a), "--k", "2"
    )
    assert len(scripted) == n_prompts + 2
    invoke(
        "verify", str(dataset), "--corpus", str(dataset), "--llm", "scripted", "--out", str(run_a), "--k", "2"
    )
    assert len(scripted) == n_prompts + 2
    assert len((run_a / "results.jsonl").read_text().splitlines()) == 3

    # with the reader, reusing run A's answers: one reader + one classifier call per question
    run_b = tmp_path / "reader"
    before = len(scripted)
    invoke("verify", str(dataset), "--corpus", str(dataset), "--llm", "scripted", "--out", str(run_b),
           "--k", "2", "--reader", "--answers-from", str(run_a))  # fmt: skip
    assert len(scripted) == before + 6
    assert not any("You are an expert in this field" in p for p in scripted[before:])

    cmp_dir = tmp_path / "cmp"
    table = invoke("verify-compare", str(run_a), str(run_b), "--out", str(cmp_dir))
    assert "| plain \\ reader | Yes | No | Not Related |" in table
    assert "| Yes | 0 (0.0%) | 3 (100.0%) | 0 (0.0%) |" in table and "changed: 3" in table
    saved = json.loads((cmp_dir / "agreement.json").read_text())
    assert saved["counts"]["supported"]["contradicted"] == 3 and saved["metrics"]["agreement"] == 0.0


def test_torn_last_line_is_redone(tmp_path: Path, dataset: Path, scripted: list[str]) -> None:
    run = tmp_path / "run"
    invoke(
        "verify",
        str(dataset),
        "--corpus",
        str(dataset),
        "--llm",
        "scripted",
        "--out",
        str(run),
        "--limit",
        "2",
    )
    path = run / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1][:25])  # killed while writing q2
    invoke(
        "verify",
        str(dataset),
        "--corpus",
        str(dataset),
        "--llm",
        "scripted",
        "--out",
        str(run),
        "--limit",
        "2",
    )
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == ["q1", "q2"]


def test_msmarco_tsv_inputs(tmp_path: Path, scripted: list[str]) -> None:
    (tmp_path / "collection.tsv").write_text(
        "0\tThe Zorbian lighthouse was painted green in 1931.\n1\tMarlow pies are baked with quince.\n"
        "2\tRope is stored in the rope house.\n3\tThe spring fair opens at dawn.\n",
        encoding="utf-8",
    )
    (tmp_path / "queries.tsv").write_text(
        "100\twhat colour is the zorbian lighthouse\n200\twhen does the fair open\n", encoding="utf-8"
    )
    (tmp_path / "qrels").write_text("100 0 0 1\n", encoding="utf-8")
    run = tmp_path / "run"
    invoke("verify", str(tmp_path / "queries.tsv"), "--corpus", str(tmp_path / "collection.tsv"),
           "--llm", "scripted", "--out", str(run), "--qrels", str(tmp_path / "qrels"),
           "--negatives", "1")  # fmt: skip
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["100"]  # only judged queries
    assert rows[0]["evidence"][0]["id"] == "0"
    assert len(rows[0]["evidence"]) <= 2  # judged passage + 1 sampled negative indexed


def test_errors_are_one_line(tmp_path: Path, dataset: Path, scripted: list[str]) -> None:
    runner = CliRunner()
    run = tmp_path / "run"
    base = [
        "verify",
        str(dataset),
        "--corpus",
        str(dataset),
        "--llm",
        "scripted",
        "--out",
        str(run),
        "--limit",
        "1",
    ]
    assert runner.invoke(app, base).exit_code == 0
    changed = runner.invoke(app, [*base, "--reader"])
    assert changed.exit_code == 2 and "another configuration (reader: False -> True)" in changed.output
    bad = runner.invoke(app, [*base[:-4], "--out", str(tmp_path / "x"), "--retriever", "splade"])
    assert bad.exit_code == 2 and "unknown retriever 'splade'" in bad.output
    missing = runner.invoke(
        app, ["verify", str(tmp_path / "nope"), "--corpus", str(dataset), "--out", str(run)]
    )
    assert missing.exit_code == 2 and "questions not found" in missing.output
    assert "Traceback" not in missing.output
