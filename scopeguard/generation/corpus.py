"""Corpus input for the generator: folders, JSONL files and Python objects, with ELOQ's length rule.

Accepted sources (:func:`load_generation_corpus`):

* a folder of ``.txt`` / ``.md`` files (the id is the file name without suffix), or a folder in the
  canonical dataset format (``documents.jsonl``);
* a JSONL file, one object per line with ``doc_id`` (or ``id``) and ``text`` (or ``page_content`` /
  ``content``); other fields are kept as metadata;
* Python objects: strings, :class:`~scopeguard.types.Document`, dicts like the JSONL lines, LangChain
  documents (``page_content`` / ``metadata`` / ``id``) and LlamaIndex documents (``text`` or
  ``get_content()`` / ``metadata`` / ``id_``), duck-typed, so neither library is imported.

The length rule of the ELOQ paper (section 3.1) is the default: documents under 150 words are skipped,
longer ones keep whole sentences from the start until the word count exceeds 300.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from scopeguard._sentences import sentence_spans
from scopeguard.data import read_jsonl
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.types import Document

__all__ = [
    "Corpus",
    "CorpusOptions",
    "LengthRule",
    "SkippedDocument",
    "corpus_passages",
    "load_generation_corpus",
    "to_document",
    "truncate_words",
]

_TEXT_SUFFIXES = (".txt", ".md")
_ID_KEYS = ("doc_id", "id", "_id", "id_")
_TEXT_KEYS = ("text", "page_content", "content", "document")


def _words(text: str) -> int:
    return len(text.split())


def truncate_words(text: str, max_words: int) -> str:
    """Whole sentences from the start until the word count exceeds ``max_words`` (ELOQ, section 3.1).

    The sentence that crosses the limit is kept; a text with no sentence boundary is returned whole.
    """
    if _words(text) <= max_words:
        return text.strip()
    for _, end in sentence_spans(text):
        if _words(text[:end]) > max_words:
            return text[:end].strip()
    return text.strip()


@dataclass(frozen=True)
class LengthRule:
    """Skip documents under ``min_words``; cut longer ones after ``max_words`` (``None`` disables)."""

    min_words: int | None = 150
    max_words: int | None = 300

    def __post_init__(self) -> None:
        for name in ("min_words", "max_words"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigurationError(f"LengthRule.{name} must be a positive integer or None, got {value}")

    def apply(self, text: str) -> tuple[str | None, str]:
        """``(text, "")`` for a usable document, ``(None, reason)`` for a skipped one."""
        n = _words(text)
        if self.min_words is not None and n < self.min_words:
            return None, f"too short: {n} words < {self.min_words}"
        if self.max_words is not None:
            text = truncate_words(text, self.max_words)
        return text.strip(), ""


@dataclass(frozen=True)
class SkippedDocument:
    id: str
    reason: str


@dataclass(frozen=True)
class Corpus:
    """Documents ready for generation, in input order, and the ones skipped with a reason."""

    documents: tuple[Document, ...]
    skipped: tuple[SkippedDocument, ...]

    def __len__(self) -> int:
        return len(self.documents)


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = obj.get(k)
        if v not in (None, ""):
            return v
    return None


def to_document(obj: Any, *, default_id: str) -> Document:
    """Convert one supported object to a :class:`Document` (see the module docstring)."""
    if isinstance(obj, Document):
        return obj if obj.id else obj.model_copy(update={"id": default_id})
    if isinstance(obj, str):
        return Document(text=obj, id=default_id)
    if isinstance(obj, dict):
        text = _first(obj, _TEXT_KEYS)
        doc_id = _first(obj, _ID_KEYS)
        meta = {k: v for k, v in obj.items() if k not in (*_TEXT_KEYS, *_ID_KEYS)}
        if isinstance(meta.get("metadata"), dict):
            meta = {**meta.pop("metadata"), **meta}
    else:
        meta_obj = getattr(obj, "metadata", None)
        meta = dict(meta_obj) if isinstance(meta_obj, dict) else {}
        if isinstance(getattr(obj, "page_content", None), str):  # LangChain
            text = obj.page_content
        elif callable(getattr(obj, "get_content", None)):  # LlamaIndex
            text = obj.get_content()
        else:
            text = getattr(obj, "text", None)
        doc_id = getattr(obj, "id_", None) or getattr(obj, "id", None) or _first(meta, _ID_KEYS)
    if not isinstance(text, str):
        raise InputError(
            f"document {default_id}: cannot find its text (expected a str, a Document, a dict with 'text', "
            f"or an object with page_content / text / get_content()); got {type(obj).__name__}"
        )
    return Document(text=text, id=str(doc_id) if doc_id not in (None, "") else default_id, metadata=meta)


def _from_folder(root: Path) -> list[Document]:
    if (root / "documents.jsonl").is_file():
        return _from_jsonl(root / "documents.jsonl")
    files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in _TEXT_SUFFIXES)
    if not files:
        raise InputError(f"corpus folder {root} has no .txt or .md files (and no documents.jsonl)")
    docs = []
    for p in files:
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"corpus file is not UTF-8 text: {p}") from None
        docs.append(Document(text=text, id=p.stem, metadata={"source_path": p.name}))
    return docs


def _from_jsonl(path: Path) -> list[Document]:
    docs = []
    for i, obj in enumerate(read_jsonl(path), 1):
        docs.append(to_document(obj, default_id=f"{path.stem}-{i}"))
    return docs


class CorpusOptions(TypedDict, total=False):
    """The keywords of :func:`load_generation_corpus` after its source, as
    :meth:`~scopeguard.generation.Generator.arun` passes them on."""

    length_rule: LengthRule | None
    max_docs: int | None


def load_generation_corpus(
    source: str | os.PathLike[str] | Iterable[Any],
    *,
    length_rule: LengthRule | None = None,
    max_docs: int | None = None,
) -> Corpus:
    """Read documents from ``source`` and apply ``length_rule`` (ELOQ's 150/300 words by default).

    ``max_docs`` limits the number of *usable* documents (skipped ones do not count).
    Raises :class:`InputError` for a missing path, an unknown file type or duplicate ids.
    """
    rule = length_rule if length_rule is not None else LengthRule()
    if max_docs is not None and max_docs < 1:
        raise ConfigurationError(f"max_docs must be at least 1, got {max_docs}")
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            raw = _from_folder(path)
        elif path.is_file() and path.suffix.lower() in (".jsonl", ".json"):
            raw = _from_jsonl(path) if path.suffix.lower() == ".jsonl" else _from_json(path)
        elif path.is_file() and path.suffix.lower() in _TEXT_SUFFIXES:
            raw = [Document(text=path.read_text(encoding="utf-8"), id=path.stem)]
        elif not path.exists():
            raise InputError(f"corpus not found: {path}")
        else:
            raise InputError(
                f"unsupported corpus file {path}: use a folder of .txt/.md files or a .jsonl file"
            )
    else:
        raw = [to_document(obj, default_id=f"doc-{i}") for i, obj in enumerate(source)]
    seen: set[str] = set()
    docs: list[Document] = []
    skipped: list[SkippedDocument] = []
    for d in raw:
        if d.id in seen:
            raise InputError(f"duplicate document id {d.id!r} in the corpus")
        seen.add(d.id)
        if not d.text.strip():
            skipped.append(SkippedDocument(d.id, "empty"))
            continue
        if max_docs is not None and len(docs) >= max_docs:
            break
        text, reason = rule.apply(d.text)
        if text is None:
            skipped.append(SkippedDocument(d.id, reason))
            continue
        docs.append(d.model_copy(update={"text": text}))
    return Corpus(documents=tuple(docs), skipped=tuple(skipped))


def _from_json(path: Path) -> list[Document]:
    """A JSON list of documents, or ELOQ's ``news.json`` mapping ``{doc_id: {...}}``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON ({exc.msg})") from None
    if isinstance(data, dict):
        return [
            to_document({"doc_id": k, **v} if isinstance(v, dict) else {"doc_id": k, "text": v}, default_id=k)
            for k, v in data.items()
        ]
    if isinstance(data, list):
        return [to_document(obj, default_id=f"{path.stem}-{i}") for i, obj in enumerate(data, 1)]
    raise InputError(f"{path}: expected a JSON list or object of documents")


def corpus_passages(corpus: str | os.PathLike[str]) -> tuple[Document, ...]:
    """Every document of ``corpus`` as it is (a dataset folder's ``documents.jsonl``, a JSONL file
    or a folder of ``.txt`` / ``.md`` files), none cut or joined: what calibrate draws from and what
    ``scopeguard preread`` and ``serve --preread`` read. An :class:`InputError` when it has none."""
    passages = load_generation_corpus(
        corpus, length_rule=LengthRule(min_words=None, max_words=None)
    ).documents
    if not passages:
        raise InputError(f"the corpus {corpus} has no documents")
    return passages
