"""A query log: the questions a RAG system's users asked, with what it retrieved for them.

Calibration (``scopeguard calibrate CORPUS --questions LOG``) sets its operating point on them, and
generation (``scopeguard generate CORPUS --questions LOG``) lends them to neighbouring documents
as out-of-scope tests. One format for both, JSON Lines or CSV:

- ``question`` (or ``query``): the question, required;
- ``id``: a unique id (default ``log-N``, N the line number);
- ``doc_ids``: the ids of the corpus documents the retriever returned, best first (a list in JSON
  Lines; in CSV separated by ``|``);
- ``documents`` (JSON Lines only): the chunks themselves, a list of strings or of
  ``{"id", "text"}`` objects, best first;
- ``label``: ``in_scope``, ``out_of_scope`` or ``unsure``, when somebody already knows.

Other fields are kept in :attr:`LoggedQuestion.metadata`. A malformed line is an
:class:`~scopeguard.errors.InputError` naming the file and the line.

    from scopeguard.querylog import read_query_log
    for q in read_query_log("queries.jsonl"):
        print(q.id, q.question, q.doc_ids)
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from scopeguard.data import numbered_jsonl
from scopeguard.errors import DatasetError, InputError
from scopeguard.types import Document

__all__ = ["LOG_LABELS", "LogLabel", "LoggedQuestion", "read_query_log"]

LogLabel = Literal["in_scope", "out_of_scope", "unsure"]
#: the labels a log line (or a person labelling it) may give
LOG_LABELS: tuple[LogLabel, ...] = ("in_scope", "out_of_scope", "unsure")
_QUESTION_KEYS = ("question", "query")
_KNOWN = frozenset({*_QUESTION_KEYS, "id", "doc_ids", "documents", "label"})
_CSV_SUFFIXES = (".csv", ".tsv")


@dataclass(frozen=True)
class LoggedQuestion:
    """One question of a query log; ``line`` is where it was in the file."""

    id: str
    question: str
    line: int
    doc_ids: tuple[str, ...] = ()
    documents: tuple[Document, ...] = ()
    label: LogLabel | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _documents(value: Any, qid: str, where: str) -> tuple[Document, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InputError(f"{where}: 'documents' must be a list of strings or {{id, text}} objects")
    docs = []
    for i, item in enumerate(value, 1):
        if isinstance(item, str):
            docs.append(Document(id=f"{qid}#{i}", text=item))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            doc_id = item.get("id", item.get("doc_id", f"{qid}#{i}"))
            docs.append(Document(id=str(doc_id), text=item["text"]))
        else:
            raise InputError(f"{where}: document {i} is neither a string nor an object with a 'text'")
    if any(not d.text.strip() for d in docs):
        raise InputError(f"{where}: a document is empty")
    return tuple(docs)


def _doc_ids(value: Any, where: str) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):  # CSV: "a|b|c"
        return tuple(p.strip() for p in value.split("|") if p.strip())
    if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return tuple(str(v) for v in value)
    raise InputError(f"{where}: 'doc_ids' must be a list of ids (in CSV: ids separated by '|')")


def _record(row: dict[str, Any], line: int, path: Path) -> LoggedQuestion:
    where = _where(path, line)
    question = next((_text(row.get(k)) for k in _QUESTION_KEYS if _text(row.get(k))), None)
    if question is None:
        raise InputError(f"{where}: no question (a non-empty 'question' field)")
    raw_id = row.get("id")
    qid = f"log-{line}" if raw_id is None or raw_id == "" else str(raw_id)
    label = row.get("label")
    if label == "" or label is None:
        label = None
    elif label not in LOG_LABELS:
        raise InputError(f"{where}: label {label!r} is not one of {', '.join(LOG_LABELS)}")
    return LoggedQuestion(
        id=qid,
        question=question,
        line=line,
        doc_ids=_doc_ids(row.get("doc_ids"), where),
        documents=_documents(row.get("documents"), qid, where),
        label=label,
        metadata={k: v for k, v in row.items() if k not in _KNOWN},
    )


def _json_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        yield from numbered_jsonl(path)
    except DatasetError as exc:
        raise InputError(str(exc)) from None


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
        if not reader.fieldnames or not set(_QUESTION_KEYS) & {f.strip() for f in reader.fieldnames}:
            raise InputError(f"{path.name}: the first line must be a header with a 'question' column")
        if "documents" in reader.fieldnames:
            raise InputError(
                f"{path.name}: a CSV log names documents by 'doc_ids'; give chunks in JSON Lines"
            )
        for row in reader:
            if None in row:  # more cells than the header has
                raise InputError(f"{_where(path, reader.line_num)}: more cells than the header names")
            yield reader.line_num, {k.strip(): v for k, v in row.items() if k is not None}


def read_query_log(path: str | os.PathLike[str]) -> list[LoggedQuestion]:
    """The questions of the log ``path`` (``.csv`` / ``.tsv`` by suffix, else JSON Lines), in order.

    Raises :class:`~scopeguard.errors.InputError` for a missing or empty log, a malformed line
    (naming it) or an id given twice.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"query log not found: {p}")
    rows = _csv_rows(p) if p.suffix.lower() in _CSV_SUFFIXES else _json_rows(p)
    out: list[LoggedQuestion] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        q = _record(row, line, p)
        if q.id in seen:
            raise InputError(f"{_where(p, line)}: id {q.id!r} was already used on line {seen[q.id]}")
        seen[q.id] = line
        out.append(q)
    if not out:
        raise InputError(f"query log {p} has no questions")
    return out
