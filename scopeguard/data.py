"""Dataset I/O in the canonical format: a folder with ``documents.jsonl`` + ``questions.jsonl``.

documents.jsonl: one object per document with ``doc_id`` and ``text`` (other fields, such as
``topic``, ``source_url``, ``claims``, ``hallucinated_claims``, are kept in metadata).
questions.jsonl: one object per question with ``id``, ``doc_id``, ``question`` and ``label``
(``in_scope`` | ``out_of_scope``); other fields are kept in metadata.

The generator writes this format; every evaluator reads it.
"""

from __future__ import annotations

import json
import os
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scopeguard.errors import DatasetError
from scopeguard.types import Document

__all__ = [
    "Dataset",
    "LabeledQuestion",
    "atomic_open",
    "atomic_write_json",
    "atomic_write_jsonl",
    "atomic_write_sealed",
    "atomic_write_text",
    "jsonl_writer",
    "load_dataset",
    "numbered_jsonl",
    "read_jsonl",
    "save_dataset",
    "unseal",
]

DOCUMENTS_FILE = "documents.jsonl"
QUESTIONS_FILE = "questions.jsonl"


class LabeledQuestion(BaseModel):
    """A question about one document, with its in/out-of-scope label."""

    model_config = ConfigDict(frozen=True)

    id: str
    doc_id: str
    question: str
    label: Literal["in_scope", "out_of_scope"]
    metadata: dict[str, Any] = Field(default_factory=dict)


class Dataset(BaseModel):
    """Documents by id and the labelled questions about them."""

    model_config = ConfigDict(frozen=True)

    documents: dict[str, Document]
    questions: tuple[LabeledQuestion, ...]

    def __len__(self) -> int:
        return len(self.questions)

    def pairs(self) -> Iterator[tuple[LabeledQuestion, Document]]:
        """Each question with its own document."""
        for q in self.questions:
            yield q, self.documents[q.doc_id]

    def topic(self, question: LabeledQuestion) -> str:
        return str(self.documents[question.doc_id].metadata.get("topic", "all"))


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSON Lines file; blank lines are skipped."""
    for _, obj in numbered_jsonl(path):
        yield obj


def numbered_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each object of a JSON Lines file; blank lines are
    skipped (and counted). A line that is not a JSON object is a :class:`DatasetError` naming it."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError("file not found", path=str(p))
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"invalid JSON ({exc.msg})", path=str(p), line=lineno) from None
            if not isinstance(obj, dict):
                raise DatasetError("each line must be a JSON object", path=str(p), line=lineno)
            yield lineno, obj


def _require(obj: dict[str, Any], keys: tuple[str, ...], path: Path, line: int) -> None:
    missing = [k for k in keys if not isinstance(obj.get(k), str) or not obj[k].strip()]
    if missing:
        raise DatasetError(f"missing or empty field(s): {', '.join(missing)}", path=str(path), line=line)


def load_dataset(directory: str | os.PathLike[str]) -> Dataset:
    """Load and validate a dataset folder in the canonical format."""
    root = Path(directory)
    if not root.is_dir():
        raise DatasetError("dataset folder not found", path=str(root))
    docs_path, qs_path = root / DOCUMENTS_FILE, root / QUESTIONS_FILE
    documents: dict[str, Document] = {}
    for i, obj in enumerate(read_jsonl(docs_path), 1):
        _require(obj, ("doc_id", "text"), docs_path, i)
        meta = {k: v for k, v in obj.items() if k not in ("doc_id", "text")}
        if obj["doc_id"] in documents:
            raise DatasetError(f"duplicate doc_id {obj['doc_id']!r}", path=str(docs_path), line=i)
        documents[obj["doc_id"]] = Document(id=obj["doc_id"], text=obj["text"], metadata=meta)
    questions: list[LabeledQuestion] = []
    seen: set[str] = set()
    for i, obj in enumerate(read_jsonl(qs_path), 1):
        _require(obj, ("id", "doc_id", "question", "label"), qs_path, i)
        if obj["label"] not in ("in_scope", "out_of_scope"):
            raise DatasetError(
                f"label must be 'in_scope' or 'out_of_scope', got {obj['label']!r}", path=str(qs_path), line=i
            )
        if obj["doc_id"] not in documents:
            raise DatasetError(
                f"question refers to unknown doc_id {obj['doc_id']!r}", path=str(qs_path), line=i
            )
        if obj["id"] in seen:
            raise DatasetError(f"duplicate question id {obj['id']!r}", path=str(qs_path), line=i)
        seen.add(obj["id"])
        meta = {k: v for k, v in obj.items() if k not in ("id", "doc_id", "question", "label")}
        questions.append(
            LabeledQuestion(
                id=obj["id"],
                doc_id=obj["doc_id"],
                question=obj["question"],
                label=obj["label"],
                metadata=meta,
            )
        )
    if not questions:
        raise DatasetError("dataset has no questions", path=str(qs_path))
    return Dataset(documents=documents, questions=tuple(questions))


@contextmanager
def atomic_open(path: str | os.PathLike[str], mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
    """``with atomic_open(p) as fh: ...``: the one atomic writer. ``fh`` is a temp file beside ``p``
    that is fsynced and replaces ``p`` only when the block ends without an error, so a kill never
    leaves half a file (and a failed block leaves ``p`` as it was)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        text = "b" not in mode
        with tmp.open(mode, encoding="utf-8" if text else None, newline="" if text else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)


#: a sealed file starts with this, then the payload's length and CRC-32 (:func:`atomic_write_sealed`)
_SEAL = struct.Struct("<8sQI")
_SEAL_MAGIC = b"SGSEAL1\n"


def atomic_write_sealed(path: str | os.PathLike[str], payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically (see :func:`atomic_open`) behind a seal (a magic,
    its length and its CRC-32), so that :func:`unseal` tells a file damaged since (a flipped bit, a
    cut copy) from a good one. For binary caches whose bytes no parser checks (a model's kept
    state, a feature vector): loaded damaged, they would give a wrong answer, not an error."""
    with atomic_open(path, "wb") as fh:
        fh.write(_SEAL.pack(_SEAL_MAGIC, len(payload), zlib.crc32(payload)))
        fh.write(payload)


def unseal(blob: bytes) -> bytes:
    """The payload of a file written by :func:`atomic_write_sealed`; a ``ValueError`` naming what
    is wrong when it was damaged since. A file without the seal (written before there was one) is
    returned as it is, for its own format's checks."""
    if not blob.startswith(_SEAL_MAGIC):
        return blob
    if len(blob) < _SEAL.size:
        raise ValueError("the file is cut short inside its seal")
    _, length, crc = _SEAL.unpack_from(blob)
    payload = blob[_SEAL.size :]
    if len(payload) != length:
        raise ValueError(
            f"the file holds {len(payload)} bytes after its seal, not {length}: cut short or grown"
        )
    if zlib.crc32(payload) != crc:
        raise ValueError("the file's checksum does not match its bytes: damaged since it was written")
    return payload


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path) as fh:
        fh.write(text)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int = 2) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically (see :func:`atomic_open`)."""
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


@contextmanager
def jsonl_writer(path: str | os.PathLike[str]) -> Iterator[Callable[[dict[str, Any]], None]]:
    """``with jsonl_writer(p) as write: write(row)``: rows go to ``p`` atomically (see
    :func:`atomic_open`)."""
    with atomic_open(path) as fh:

        def write(row: dict[str, Any]) -> None:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")

        yield write


def atomic_write_jsonl(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write rows to ``path`` atomically (see :func:`jsonl_writer`)."""
    with jsonl_writer(path) as write:
        for row in rows:
            write(row)


def save_dataset(dataset: Dataset, directory: str | os.PathLike[str]) -> Path:
    """Write ``dataset`` to ``directory`` in the canonical format."""
    root = Path(directory)
    atomic_write_jsonl(
        root / DOCUMENTS_FILE,
        [{"doc_id": d.id, "text": d.text, **d.metadata} for d in dataset.documents.values()],
    )
    atomic_write_jsonl(
        root / QUESTIONS_FILE,
        [
            {"id": q.id, "doc_id": q.doc_id, "question": q.question, "label": q.label, **q.metadata}
            for q in dataset.questions
        ],
    )
    return root
