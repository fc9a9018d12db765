"""Split documents into short passages, the unit the verifier retrieves and compares.

MS MARCO passages are a few sentences long; long news documents are split into windows of
``sentences`` sentences with ids ``"{doc_id}#p{i}"`` (``i`` from 0) so evidence stays concise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from scopeguard._sentences import split_sentences
from scopeguard.data import Dataset
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document

__all__ = ["dataset_passages", "iter_passages", "split_passages", "split_sentences"]


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
