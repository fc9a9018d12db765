"""``ScopeGuardRetriever``: wraps any LangChain retriever and checks what it returns."""

from __future__ import annotations

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from pydantic import ConfigDict

from langchain_scopeguard._common import METADATA_KEY, Granularity
from langchain_scopeguard._filter import aguard_documents, guard_documents
from scopeguard import Guard

__all__ = ["ScopeGuardRetriever"]


class ScopeGuardRetriever(BaseRetriever):
    """Retrieve with ``retriever``, then ask the guard's detector whether the results answer the query.

    Every returned document carries the verdict under ``metadata["scopeguard"]`` (label, score,
    ``out_of_scope``, ``failed_closed``, ...). With ``drop_out_of_scope=True`` the documents that
    do not cover the query are removed (an empty list when the whole set is out of scope), so a
    downstream chain sees no misleading context.

    Args:
        retriever: the inner retriever (any ``Runnable[str, list[Document]]``).
        guard: a :class:`scopeguard.Guard`; its detector and ``on_error`` setting decide.
        granularity: ``"set"`` checks the query against all documents together (one verdict);
            ``"document"`` checks each document on its own.
        drop_out_of_scope: remove out-of-scope documents instead of only annotating them.
        metadata_key: where the verdict goes in each document's metadata.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Runnable[str, list[LCDocument]]
    guard: Guard
    granularity: Granularity = "set"
    drop_out_of_scope: bool = False
    metadata_key: str = METADATA_KEY

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        docs = self.retriever.invoke(query, config={"callbacks": run_manager.get_child()})
        return guard_documents(
            self.guard,
            query,
            docs,
            granularity=self.granularity,
            drop=self.drop_out_of_scope,
            key=self.metadata_key,
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        docs = await self.retriever.ainvoke(query, config={"callbacks": run_manager.get_child()})
        return await aguard_documents(
            self.guard,
            query,
            docs,
            granularity=self.granularity,
            drop=self.drop_out_of_scope,
            key=self.metadata_key,
        )
