"""Typed records and canonical dataset I/O."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from scopeguard import DatasetError, Document, Verdict, load_dataset, save_dataset
from scopeguard.types import as_documents


def test_verdict_score_must_be_a_probability() -> None:
    with pytest.raises(ValidationError):
        Verdict(label="in_scope", score=1.5)
    with pytest.raises(ValidationError):
        Verdict(label="maybe", score=0.5)  # type: ignore[arg-type]


def test_records_are_frozen() -> None:
    v = Verdict(label="in_scope", score=0.2)
    with pytest.raises(ValidationError):
        v.label = "out_of_scope"  # type: ignore[misc]


def test_as_documents_accepts_strings_and_documents() -> None:
    docs = as_documents(["a text", Document(id="x", text="b")])
    assert [d.id for d in docs] == ["doc0", "x"]
    assert as_documents("solo")[0].text == "solo"


def _write(dir_: Path, docs: list[dict], qs: list[dict]) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (dir_ / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    return dir_


def test_dataset_round_trip(tmp_path: Path) -> None:
    src = _write(
        tmp_path / "a",
        [{"doc_id": "d1", "text": "Some text.", "topic": "tech"}],
        [{"id": "q1", "doc_id": "d1", "question": "What?", "label": "in_scope", "extra": 1}],
    )
    ds = load_dataset(src)
    assert ds.topic(ds.questions[0]) == "tech" and ds.questions[0].metadata == {"extra": 1}
    again = load_dataset(save_dataset(ds, tmp_path / "b"))
    assert again == ds


@pytest.mark.parametrize(
    ("qs", "message"),
    [
        ([{"id": "q1", "doc_id": "nope", "question": "Q?", "label": "in_scope"}], "unknown doc_id"),
        ([{"id": "q1", "doc_id": "d1", "question": "Q?", "label": "yes"}], "label must be"),
        ([{"id": "q1", "doc_id": "d1", "question": "", "label": "in_scope"}], "missing or empty field"),
        ([], "no questions"),
    ],
)
def test_dataset_errors_name_the_problem(tmp_path: Path, qs: list[dict], message: str) -> None:
    src = _write(tmp_path, [{"doc_id": "d1", "text": "T."}], qs)
    with pytest.raises(DatasetError, match=message):
        load_dataset(src)


def test_missing_folder_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "missing")
    tmp_path.joinpath("documents.jsonl").write_text("{not json\n")
    tmp_path.joinpath("questions.jsonl").write_text("")
    with pytest.raises(DatasetError, match=r"documents.jsonl:1: invalid JSON"):
        load_dataset(tmp_path)


def test_dev_dataset_loads(dev_data_dir: Path) -> None:
    ds = load_dataset(dev_data_dir)
    assert len(ds) == 144 and len(ds.documents) == 30
    assert {q.label for q in ds.questions} == {"in_scope", "out_of_scope"}
