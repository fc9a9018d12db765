"""``ScopeGuardRetriever``: wraps any LangChain retriever and checks what it returns."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ConfigDict, Field

from langchain_scopeguard._common import METADATA_KEY, AnyGuard, Granularity, Prereading
from langchain_scopeguard._filter import aguard_documents, guard_documents
from scopeguard import ConfigurationError
from scopeguard.types import StrictOptions

__all__ = ["ScopeGuardRetriever"]


class ScopeGuardRetriever(StrictOptions, Prereading, BaseRetriever):
    """Retrieve with ``retriever``, then ask the guard's detector whether the results answer the query.

    Every returned document carries the verdict under ``metadata["scopeguard"]`` (label, score,
    ``out_of_scope``, ``failed_closed``, ...). With ``drop_out_of_scope=True`` the documents that
    do not cover the query are removed (an empty list when the whole set is out of scope), so a
    downstream chain sees no misleading context. Each verdict is also traced as a
    ``ScopeGuardVerdict`` child run whose metadata (``scopeguard_label``, ``scopeguard_score``,
    ``scopeguard_detector``, ``scopeguard_stage``, ...) and tags (``scopeguard:out_of_scope``) hold it.

    ``k`` and ``search_kwargs`` (and any keyword given to ``invoke``, which wins) reach the inner
    retriever: as keyword arguments when it takes them (``VectorStoreRetriever`` does), else as
    its fields of the same name (a copy is used). A ``k`` it can take neither way cuts its
    results to the first ``k``; any other option it cannot take raises ConfigurationError. ``k``
    counts the documents retrieved, before ``drop_out_of_scope`` removes any.

    ``preread(chunks)`` / ``preread_in_background(chunks)`` read the chunks you index ahead of the
    questions (:meth:`scopeguard.Guard.preread`, :meth:`scopeguard.Guard.preread_in_background`).

    Args:
        retriever: the inner retriever (any ``Runnable[str, list[Document]]``).
        guard: a :class:`scopeguard.Guard`; its detector and ``on_error`` setting decide.
        granularity: ``"set"`` checks the query against all documents together (one verdict);
            ``"document"`` checks each document on its own.
        drop_out_of_scope: remove out-of-scope documents instead of only annotating them.
        metadata_key: where the verdict goes in each document's metadata.
        k: how many documents to retrieve (``None``: the inner retriever's own setting).
        search_kwargs: more options for the inner retriever (``{"filter": ...}``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Runnable[str, list[LCDocument]]
    guard: AnyGuard
    granularity: Granularity = "set"
    drop_out_of_scope: bool = False
    metadata_key: str = METADATA_KEY
    k: int | None = Field(default=None, ge=1)
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**self.search_kwargs, **({} if self.k is None else {"k": self.k}), **kwargs}

    def _inner(self, options: dict[str, Any]) -> tuple[Runnable[str, list[LCDocument]], dict[str, Any], int]:
        """The retriever to call, the keyword arguments to call it with, and a cut (0: none)."""
        inner = self.retriever
        if not options or (isinstance(inner, BaseRetriever) and inner._expects_other_args):
            return inner, options, 0
        fields = type(inner).model_fields if isinstance(inner, BaseModel) else {}
        update = {name: value for name, value in options.items() if name in fields}
        rest = {name: value for name, value in options.items() if name not in fields}
        cut = int(rest.pop("k", 0) or 0)
        if rest:
            raise ConfigurationError(
                f"the inner retriever {type(inner).__name__} takes no keyword arguments and has no "
                f"fields named {sorted(rest)}; ScopeGuardRetriever cannot pass them on"
            )
        if update and isinstance(inner, BaseModel):
            inner = inner.model_copy(update=update)
        return inner, {}, cut

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        inner, options, cut = self._inner(self._options(kwargs))
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        docs = inner.invoke(query, config, **options)
        return guard_documents(
            self.guard,
            query,
            docs[:cut] if cut else docs,
            granularity=self.granularity,
            drop=self.drop_out_of_scope,
            key=self.metadata_key,
            callbacks=run_manager.get_child(),
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        inner, options, cut = self._inner(self._options(kwargs))
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        docs = await inner.ainvoke(query, config, **options)
        return await aguard_documents(
            self.guard,
            query,
            docs[:cut] if cut else docs,
            granularity=self.granularity,
            drop=self.drop_out_of_scope,
            key=self.metadata_key,
            callbacks=run_manager.get_child(),
        )
