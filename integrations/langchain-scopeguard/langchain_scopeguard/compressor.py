"""``ScopeGuardCompressor``: a document compressor for ``ContextualCompressionRetriever``."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor
from langchain_core.documents import Document as LCDocument
from pydantic import ConfigDict

from langchain_scopeguard._common import METADATA_KEY, AnyGuard, Granularity, Prereading
from langchain_scopeguard._filter import aguard_documents, guard_documents
from scopeguard.types import StrictOptions

__all__ = ["ScopeGuardCompressor"]


class ScopeGuardCompressor(StrictOptions, Prereading, BaseDocumentCompressor):
    """Keep only the retrieved documents that cover the query.

    By default each document is checked on its own (``granularity="document"``) and those the
    detector calls out of scope (or, with ``on_error="fail_closed"``, could not judge) are
    dropped; the survivors carry the verdict under ``metadata["scopeguard"]``. Each verdict is also
    traced as a ``ScopeGuardVerdict`` child run whose metadata and tags hold it.
    ``preread(chunks)`` / ``preread_in_background(chunks)`` read the indexed chunks ahead of the
    questions (:meth:`scopeguard.Guard.preread`).

    >>> retriever = ContextualCompressionRetriever(
    ...     base_compressor=ScopeGuardCompressor(guard=Guard(detector="default")),
    ...     base_retriever=vector_store.as_retriever(),
    ... )
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    guard: AnyGuard
    granularity: Granularity = "document"
    drop_out_of_scope: bool = True
    metadata_key: str = METADATA_KEY

    def compress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        return guard_documents(
            self.guard,
            query,
            documents,
            granularity=self.granularity,
            drop=self.drop_out_of_scope,
            key=self.metadata_key,
            callbacks=callbacks,
        )

    async def acompress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        return await aguard_documents(
            self.guard,
            query,
            documents,
            granularity=self.granularity,
            drop=self.drop_out_of_scope,
            key=self.metadata_key,
            callbacks=callbacks,
        )
