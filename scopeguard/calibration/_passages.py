"""The corpus as documents to generate questions on, and the seeded sample of them.

The generator writes questions about documents of ELOQ's length (at least
:attr:`~scopeguard.generation.corpus.LengthRule.min_words` words, cut after ``max_words``). A corpus
of short passages (snippets of a few sentences, as a chunker writes them) would give it nothing:
neighbouring passages of one source (the same ``source``, ``source_url``, ``url``, ``title`` or
``source_path`` field, next to each other in the corpus) are joined into one document until it is
long enough, as a retriever's top passages are shown together to the guard. Only a field that
names one source joins: a ``topic`` or ``category`` groups unrelated sources (the snippets of many
products under one category), and questions written on such a join ask about none of them. A
passage that carries no source field is never joined to another; when nothing is left long
enough, :func:`load_documents` says what is needed in one :class:`ConfigurationError` line.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.generation.corpus import LengthRule, corpus_passages
from scopeguard.types import Document

__all__ = [
    "SOURCE_KEYS",
    "CorpusDocuments",
    "corpus_sha256",
    "load_documents",
    "sample_documents",
]

#: the metadata fields that name a passage's source, first found wins
SOURCE_KEYS = ("source", "source_url", "url", "title", "source_path")
_TEXT_SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class CorpusDocuments:
    """The documents to generate on, in corpus order: ``joined`` of them were made of short
    passages; ``left_out`` short passages found no neighbour to reach the length."""

    documents: tuple[Document, ...]
    passages: int
    joined: int
    left_out: int


def corpus_sha256(corpus: str | os.PathLike[str]) -> str:
    """SHA-256 of the corpus: its file, a dataset folder's ``documents.jsonl``, or a folder's
    ``.txt`` / ``.md`` files (names and bytes, in name order)."""
    path = Path(corpus)
    if not path.exists():
        raise InputError(f"corpus not found: {path}")
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
    elif (path / "documents.jsonl").is_file():
        files = [path / "documents.jsonl"]
    else:
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in _TEXT_SUFFIXES)
    for file in files:
        if len(files) > 1:
            digest.update(file.name.encode("utf-8") + b"\0")
        with file.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _words(text: str) -> int:
    return len(text.split())


def _source(doc: Document) -> str | None:
    for key in SOURCE_KEYS:
        value = doc.metadata.get(key)
        if isinstance(value, (str, int)) and str(value).strip():
            return f"{key}={value}"
    return None


def _joined(group: Sequence[Document]) -> Document:
    if len(group) == 1:
        return group[0]
    return Document(
        id=f"{group[0].id}..{group[-1].id}",
        text="\n\n".join(d.text.strip() for d in group),
        metadata={**group[0].metadata, "joined": [d.id for d in group]},
    )


def load_documents(
    corpus: str | os.PathLike[str], *, min_words: int | None, max_words: int | None
) -> CorpusDocuments:
    """The documents of ``corpus`` at least ``min_words`` long (short neighbours of one source
    joined, see the module docstring), each cut after ``max_words`` words."""
    passages = corpus_passages(corpus)
    cut = LengthRule(min_words=None, max_words=max_words)
    out: list[Document] = []
    group: list[Document] = []
    joined = left_out = 0

    def close() -> None:
        nonlocal joined, left_out
        if group and min_words is not None and sum(_words(d.text) for d in group) >= min_words:
            out.append(_joined(group))
            joined += len(group) > 1
        else:
            left_out += len(group)
        group.clear()

    for doc in passages:
        if min_words is None or _words(doc.text) >= min_words:
            close()
            out.append(doc)
            continue
        source = _source(doc)
        if group and (source is None or source != _source(group[0])):
            close()
        if source is None:
            left_out += 1
            continue
        group.append(doc)
        if sum(_words(d.text) for d in group) >= min_words:
            close()
    close()
    if not out:
        raise ConfigurationError(
            f"the {len(passages)} documents of {corpus} are all under {min_words} words and no "
            f"neighbouring passages of one source ({', '.join(SOURCE_KEYS)}) add up to {min_words}: "
            f"calibrate needs passages of at least {min_words} words (--min-words), or --labelled "
            "questions"
        )
    documents = tuple(d.model_copy(update={"text": cut.apply(d.text)[0] or d.text}) for d in out)
    return CorpusDocuments(documents=documents, passages=len(passages), joined=joined, left_out=left_out)


def sample_documents(documents: Sequence[Document], n: int, seed: int) -> tuple[Document, ...]:
    """``n`` documents drawn with ``seed``, in corpus order. A larger ``n`` with the same seed
    draws the same documents and more (a prefix of one seeded shuffle), so a calibration grown
    with ``--sample`` reuses what it generated and read."""
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    return tuple(documents[i] for i in sorted(order[:n]))
