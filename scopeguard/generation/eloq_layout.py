"""Export to and import from the ELOQ dataset layout.

The layout (a folder with three files)::

    news.json       {doc_id: {"doc_id", "text", "topic"?, "source_url"?, "title"?, "claims": [str],
                              "hallucinated_claims": [str], ...other document metadata}}
    questions.json  {question_id: {"question_id", "doc_id", "question", "label", "provenance"?, ...}}
    silver.csv      one row per question, columns: doc_id, question_id, label, question
                    (label is "in_scope" or "out_of_scope"; further columns are ignored on import)

``label`` in ``questions.json`` and ``silver.csv`` uses scopeguard's names; on import the values
``in-scope``/``out-of-scope``, ``in``/``out`` and ``0``/``1`` (1 = out of scope) are accepted too.
When both files give a label, ``silver.csv`` wins (it is the reviewed one).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Literal

from scopeguard.data import Dataset, LabeledQuestion, atomic_open, atomic_write_text, load_dataset
from scopeguard.errors import DatasetError
from scopeguard.types import Document

__all__ = ["export_eloq", "import_eloq"]

NEWS_FILE, QUESTIONS_JSON, SILVER_FILE = "news.json", "questions.json", "silver.csv"
_LABELS: dict[str, Literal["in_scope", "out_of_scope"]] = {
    "in_scope": "in_scope",
    "in-scope": "in_scope",
    "in": "in_scope",
    "0": "in_scope",
    "out_of_scope": "out_of_scope",
    "out-of-scope": "out_of_scope",
    "out": "out_of_scope",
    "1": "out_of_scope",
}


def _write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1))


def export_eloq(dataset: Dataset | str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Write ``dataset`` (or a canonical dataset folder) in the ELOQ layout to ``out_dir``."""
    ds = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    news = {
        d.id: {"doc_id": d.id, "text": d.text, "claims": [], "hallucinated_claims": [], **d.metadata}
        for d in ds.documents.values()
    }
    questions = {
        q.id: {
            "question_id": q.id,
            "doc_id": q.doc_id,
            "question": q.question,
            "label": q.label,
            **q.metadata,
        }
        for q in ds.questions
    }
    _write_json(out / NEWS_FILE, news)
    _write_json(out / QUESTIONS_JSON, questions)
    with atomic_open(out / SILVER_FILE) as fh:
        writer = csv.writer(fh)
        writer.writerow(["doc_id", "question_id", "label", "question"])
        for q in ds.questions:
            writer.writerow([q.doc_id, q.id, q.label, q.question])
    return out


def _label(value: Any, where: str) -> Literal["in_scope", "out_of_scope"]:
    label = _LABELS.get(str(value).strip().lower())
    if label is None:
        raise DatasetError(f"unknown label {value!r} (expected in_scope or out_of_scope)", path=where)
    return label


def _load_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DatasetError("file not found", path=str(path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"invalid JSON ({exc.msg})", path=str(path)) from None
    if not isinstance(data, dict):
        raise DatasetError("expected a JSON object keyed by id", path=str(path))
    return data


def import_eloq(directory: str | os.PathLike[str]) -> Dataset:
    """Read a folder in the ELOQ layout (see the module docstring) into a :class:`Dataset`."""
    root = Path(directory)
    news, qs = _load_json(root / NEWS_FILE), _load_json(root / QUESTIONS_JSON)
    documents: dict[str, Document] = {}
    for doc_id, obj in news.items():
        text = obj.get("text") or obj.get("content") or obj.get("document") if isinstance(obj, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(f"document {doc_id!r} has no text", path=str(root / NEWS_FILE))
        meta = {k: v for k, v in obj.items() if k not in ("doc_id", "text", "content", "document")}
        documents[doc_id] = Document(id=doc_id, text=text, metadata=meta)
    silver: dict[str, Any] = {}
    if (root / SILVER_FILE).is_file():
        with (root / SILVER_FILE).open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"doc_id", "question_id", "label"} - set(reader.fieldnames or ())
            if missing:
                raise DatasetError(f"missing column(s) {sorted(missing)}", path=str(root / SILVER_FILE))
            silver = {row["question_id"]: row["label"] for row in reader}
    questions = []
    for qid, obj in qs.items():
        where = f"{root / QUESTIONS_JSON} ({qid})"
        if not isinstance(obj, dict) or not str(obj.get("question", "")).strip():
            raise DatasetError("question has no text", path=where)
        doc_id = str(obj.get("doc_id", ""))
        if doc_id not in documents:
            raise DatasetError(f"unknown doc_id {doc_id!r}", path=where)
        raw = silver.get(qid, obj.get("label"))
        if raw is None:
            raise DatasetError("question has no label in questions.json or silver.csv", path=where)
        meta = {k: v for k, v in obj.items() if k not in ("question_id", "id", "doc_id", "question", "label")}
        questions.append(
            LabeledQuestion(
                id=qid, doc_id=doc_id, question=obj["question"], label=_label(raw, where), metadata=meta
            )
        )
    if not questions:
        raise DatasetError("no questions", path=str(root / QUESTIONS_JSON))
    return Dataset(documents=documents, questions=tuple(questions))
