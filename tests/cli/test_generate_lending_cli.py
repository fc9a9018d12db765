"""``scopeguard generate CORPUS --questions LOG``: lending a query log from the command line, with a
scripted writer, filter and an in-memory retriever registered for the test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli import app
from scopeguard.data import load_dataset
from scopeguard.detection.detectors import registry as detector_registry
from scopeguard.errors import LLMError
from scopeguard.llm import registry as llm_registry
from scopeguard.retrieval import registry as retrieval_registry
from scopeguard.testing import InMemoryRetriever, ScriptedChatModel, ScriptedDetector

DOCS = {
    "ferry": "The ferry Kestrel carries passengers across the bay in 35 minutes.",
    "harbour": "The harbour of the bay holds forty boats and a ferry ramp.",
    "pier": "The old pier of the bay was rebuilt in oak after the storm.",
    "market": "The fish market opens at dawn beside the pier.",
}
QUESTION = "How many passengers does the ferry across the bay carry?"


@pytest.fixture()
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A corpus and a log, and the fakes named ``scripted`` (writer, filter, retriever)."""
    monkeypatch.setitem(llm_registry._BACKENDS, "scripted", lambda arg, **_: ScriptedChatModel([]))
    monkeypatch.setattr(retrieval_registry, "_REGISTRY", dict(retrieval_registry._REGISTRY))
    retrieval_registry.register_retriever("scripted", lambda **_: InMemoryRetriever("scripted"))
    monkeypatch.setattr(detector_registry, "_DETECTORS", dict(detector_registry._DETECTORS))
    verdicts: list[float | LLMError] = [0.9, 0.9, LLMError("the reader crashed")]
    detector_registry.register_detector("scripted", lambda: ScriptedDetector(verdicts))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": k, "text": v}) + "\n" for k, v in DOCS.items()))
    log = tmp_path / "log.csv"
    log.write_text(f"id,question,doc_ids\nq1,{QUESTION},ferry\n", encoding="utf-8")
    return corpus, log


def _args(corpus: Path, log: Path, out: Path, *more: str) -> list[str]:
    lend = [
        "--questions",
        str(log),
        "--llm",
        "scripted",
        "--filter-with",
        "scripted",
        "--retriever",
        "scripted",
        "--min-similarity",
        "0",
    ]
    return ["generate", str(corpus), "--out", str(out), *lend, "--no-progress", *more]


def test_generate_with_questions_lends_reports_and_exits_1_on_a_failed_read(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, log = files
    result = CliRunner().invoke(app, _args(corpus, log, tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert "3 question-neighbour pairs: 2 read this run, 0 resumed, 1 failed this run" in result.output
    assert "0 of 3 neighbours asked have >= 2 lent questions" in result.output
    assert "1 of 3 question-document reads failed: re-run on the same --out" in result.output
    data = load_dataset(tmp_path / "out")
    assert {q.metadata["lent_from"] for q in data.questions} == {"q1"}
    assert "ferry" not in data.documents  # its own document is never asked


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (("--claims", "3"), "--claims: not used when lending a query log"),
        (("--neighbours", "0"), "invalid option: neighbours"),
        (("--min-similarity", "1.5"), "invalid option: min_similarity"),
    ],
)
def test_options_that_do_not_apply_to_lending_are_refused(
    files: tuple[Path, Path], tmp_path: Path, more: tuple[str, ...], message: str
) -> None:
    corpus, log = files
    result = CliRunner().invoke(app, _args(corpus, log, tmp_path / "out", *more))
    assert result.exit_code == 2 and message in result.output


def test_lending_options_without_questions_are_refused(files: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, _ = files
    args = ["generate", str(corpus), "--out", str(tmp_path / "out"), "--llm", "scripted", "--neighbours", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--neighbours: used only with --questions" in result.output


def test_a_malformed_log_line_is_one_error_line_naming_it(files: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, _ = files
    log = tmp_path / "log.jsonl"
    log.write_text('{"question": "Where is the pier?"}\n{"question": oops}\n', encoding="utf-8")
    result = CliRunner().invoke(app, _args(corpus, log, tmp_path / "out"))
    assert result.exit_code == 2
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("error: ") and re.search(r"log\.jsonl(:| line )2: .*JSON", last), last
