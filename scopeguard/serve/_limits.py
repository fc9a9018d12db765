"""The server's limits on a request: a request over one is a :class:`LimitError` (a 422 naming it).

:func:`checked_documents` applies the limits on documents (how many, how long each), through which
the check API (:mod:`scopeguard.serve._app`) and the guarded proxy (:mod:`scopeguard.serve._proxy`)
read every request's documents.
"""

from __future__ import annotations

from scopeguard.errors import InputError
from scopeguard.serve._config import ServeConfig
from scopeguard.serve._schemas import Documents, to_documents
from scopeguard.types import Document

__all__ = ["LimitError", "checked_documents"]


class LimitError(InputError):
    """A request over one of the server's limits (422 naming the limit)."""

    def __init__(self, message: str, *, limit: str) -> None:
        self.limit = limit
        super().__init__(message)


def checked_documents(config: ServeConfig, items: Documents) -> list[Document]:
    """The request's documents as records, or a :class:`LimitError` naming the limit they break."""
    if len(items) > config.max_documents:
        raise LimitError(
            f"{len(items)} documents: more than max_documents={config.max_documents}", limit="max_documents"
        )
    docs = to_documents(items)
    for doc in docs:
        if len(doc.text) > config.max_document_chars:
            raise LimitError(
                f"document {doc.id!r} has {len(doc.text)} characters: more than "
                f"max_document_chars={config.max_document_chars}",
                limit="max_document_chars",
            )
    return docs
