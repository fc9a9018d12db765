"""Exit codes tell the truth: 0 all items done, 1 some items failed (and how many), 2 cannot run.

Each job runs on invented data with a scripted LLM (or detector) that fails, via typer's CliRunner.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard import BaseDetector, Document, Verdict
from scopeguard.cli import app
from scopeguard.detection.detectors import registry as detector_registry
from scopeguard.errors import DetectionError, LLMError
from scopeguard.llm import registry as llm_registry
from scopeguard.testing import ScriptedChatModel

DOCS = [
    {"doc_id": "ferry", "text": "The ferry Kestrel carries 180 passengers across the bay in 35 minutes."},
    {"doc_id": "pier", "text": "The old pier of Saltmere was rebuilt in oak after the winter storm of 1990."},
]
QUESTIONS = [
    {
        "id": "q1",
        "doc_id": "ferry",
        "question": "How many passengers does the Kestrel carry?",
        "label": "in_scope",
    },
    {"id": "q2", "doc_id": "ferry", "question": "Which shipyard built the Kestrel?", "label": "out_of_scope"},
    {
        "id": "q3",
        "doc_id": "pier",
        "question": "What wood was the Saltmere pier rebuilt in?",
        "label": "in_scope",
    },
]


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    root.mkdir()
    (root / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return root


@pytest.fixture()
def failing_llm(monkeypatch: pytest.MonkeyPatch) -> str:
    """An LLM spec whose every call fails with an LLM error (not a connection error)."""
    monkeypatch.setitem(
        llm_registry._BACKENDS,
        "failing",
        lambda arg, **_: ScriptedChatModel(lambda p: LLMError("model crashed")),
    )
    return "failing"


class _Failing(BaseDetector):
    name = "failing"

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        raise DetectionError("detector backend is down")


class _Undecided(BaseDetector):
    name = "undecided"

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        return Verdict(label="unknown", detector=self.name)


class _Exploding(BaseDetector):
    """Building it stands for loading a model: input must be refused before it is built."""

    name = "exploding"

    def __init__(self, **kwargs: object) -> None:
        raise AssertionError("the detector was built before the input was checked")

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        raise AssertionError


@pytest.fixture()
def detectors(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (_Failing, _Undecided, _Exploding):
        monkeypatch.setitem(detector_registry._DETECTORS, cls.name, cls)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_exit_codes_are_documented_in_the_help() -> None:
    code, out, _ = _run("--help")
    assert code == 0 and "Exit codes" in out and "some items failed" in out


def test_generate_exits_1_when_every_document_failed(tmp_path: Path, failing_llm: str) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(2):
        (corpus / f"doc{i}.txt").write_text(f"Harbour report number {i}. " * 40, encoding="utf-8")
    code, out, err = _run("generate", corpus, "--out", tmp_path / "out", "--llm", failing_llm,
                          "--filter-with", "lexical", "--no-progress")  # fmt: skip
    assert code == 1, out + err
    assert "0 done" in out  # the summary table is still printed
    assert "2 of 2 documents failed" in err and "re-run on the same --out to retry" in err


def test_evaluate_exits_1_when_steps_failed(tmp_path: Path, dataset: Path, failing_llm: str) -> None:
    code, out, err = _run("evaluate", dataset, "--out", tmp_path / "run", "--rag-llm", failing_llm,
                          "--judge-llm", failing_llm, "--prompt", "basic", "--no-plots",
                          "--no-progress")  # fmt: skip
    assert code == 1, out + err
    assert "3 of 3 evaluation steps failed" in err and "responses.jsonl" in err
    assert (tmp_path / "run" / "metrics.json").is_file()  # the report is still written


def test_verify_exits_1_when_questions_failed(tmp_path: Path, dataset: Path, failing_llm: str) -> None:
    pytest.importorskip("rank_bm25", reason="needs scopeguard[retrieval]")
    code, out, err = _run("verify", dataset, "--corpus", dataset, "--llm", failing_llm,
                          "--out", tmp_path / "run")  # fmt: skip
    assert code == 1, out + err
    assert "2 of 2 questions failed" in err and "results.jsonl" in err
    assert (tmp_path / "run" / "report.md").is_file()


def test_eval_detector_exits_1_when_the_detector_failed(dataset: Path, detectors: None) -> None:
    code, out, err = _run("eval-detector", dataset, "--detector", "failing", "--json", "--no-progress")
    assert code == 1, out + err
    assert json.loads(out)["n"] == 3  # the metrics are still printed
    assert "3 of 3 questions failed" in err and "detector backend is down" in err
    assert _run("eval-detector", dataset, "--detector", "lexical", "--no-progress")[0] == 0


def test_check_exit_codes(tmp_path: Path, detectors: None) -> None:
    doc = tmp_path / "ferry.txt"
    doc.write_text(DOCS[0]["text"], encoding="utf-8")
    assert _run("check", "-q", "How many passengers?", "-d", doc, "--detector", "lexical")[0] == 0
    code, out, err = _run("check", "-q", "Which shipyard?", "-d", doc, "--detector", "undecided", "--json")
    assert code == 1 and json.loads(out)["label"] == "unknown"
    assert "1 of 1 checks failed" in err
    code, _, err = _run("check", "-q", "Which shipyard?", "-d", doc, "--detector", "failing")
    assert code == 2 and "error: detector backend is down" in err  # a raised error: could not run


@pytest.mark.parametrize("question", ["", "   \n\t"])
def test_check_refuses_an_empty_question_before_building_the_detector(
    tmp_path: Path, detectors: None, question: str
) -> None:
    doc = tmp_path / "ferry.txt"
    doc.write_text(DOCS[0]["text"], encoding="utf-8")
    code, _, err = _run("check", "-q", question, "-d", doc, "--detector", "exploding")
    assert code == 2 and "question is empty" in err


def test_check_refuses_bad_document_files_before_building_the_detector(
    tmp_path: Path, detectors: None
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    binary = tmp_path / "image.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    for path, reason in (
        (tmp_path / "missing.txt", "not found"),
        (tmp_path, "not a file"),
        (empty, "is empty"),
        (binary, "not UTF-8"),
    ):
        code, _, err = _run("check", "-q", "Which shipyard?", "-d", path, "--detector", "exploding")
        assert code == 2 and reason in err, (path, err)
