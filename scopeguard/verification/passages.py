"""Split documents into short passages, the unit the verifier retrieves and compares.

MS MARCO passages are a few sentences long; long news documents are split into windows of
``sentences`` sentences with ids ``"{doc_id}#p{i}"`` (``i`` from 0) so evidence stays concise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from scopeguard.data import Dataset
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document

__all__ = ["dataset_passages", "iter_passages", "split_passages", "split_sentences"]

# A sentence ends at . ! or ? (optionally followed by a closing quote/bracket) before whitespace
# and an upper-case letter, digit or quote; common abbreviations do not end a sentence.
_ABBREVIATIONS = (
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "no",
    "vs",
    "inc",
    "ltd",
    "co",
    "rs",
    "u.s",
)
_BOUNDARY_RE = re.compile(r"(?<=[.!?])[\"'”’)\]]?\s+(?=[\"'“‘(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (a light rule-based splitter; paragraphs always split)."""
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n|\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        start = 0
        for m in _BOUNDARY_RE.finditer(paragraph):
            head = paragraph[start : m.start()].rstrip()
            last_word = head.rsplit(maxsplit=1)[-1].rstrip(".").lower() if head else ""
            if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word):
                continue
            sentences.append(paragraph[start : m.end()].strip())
            start = m.end()
        tail = paragraph[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def split_passages(document: Document, *, sentences: int = 3, stride: int | None = None) -> list[Document]:
    """Windows of ``sentences`` sentences (every ``stride``, default non-overlapping) of ``document``.

    Each passage keeps the document's metadata plus ``doc_id``, ``passage_index`` and ``sentences``.
    """
    if sentences < 1:
        raise ConfigurationError(f"sentences per passage must be >= 1, got {sentences}")
    step = stride or sentences
    if step < 1:
        raise ConfigurationError(f"stride must be >= 1, got {stride}")
    sents = split_sentences(document.text)
    doc_id = document.id or document.content_hash[:12]
    # Scalar metadata (topic, url...) rides along; lists such as claims stay with the document.
    inherited = {k: v for k, v in document.metadata.items() if isinstance(v, (str, int, float, bool))}
    out: list[Document] = []
    for i, start in enumerate(range(0, len(sents), step)):
        window = sents[start : start + sentences]
        meta = {**inherited, "doc_id": doc_id, "passage_index": i, "sentences": len(window)}
        out.append(Document(id=f"{doc_id}#p{i}", text=" ".join(window), metadata=meta))
        if start + sentences >= len(sents):
            break
    return out


def iter_passages(documents: Iterable[Document], *, sentences: int = 3) -> Iterator[Document]:
    """Stream the passages of many documents."""
    for doc in documents:
        yield from split_passages(doc, sentences=sentences)


def dataset_passages(dataset: Dataset, *, sentences: int = 3) -> list[Document]:
    """All documents of a canonical dataset split into passages (the verifier's corpus)."""
    return list(iter_passages(dataset.documents.values(), sentences=sentences))
