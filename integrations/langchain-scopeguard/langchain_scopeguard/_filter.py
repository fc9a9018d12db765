"""Check retrieved LangChain documents against a question; annotate and optionally drop them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document as LCDocument

from langchain_scopeguard._common import (
    AnyGuard,
    Granularity,
    atrace_verdicts,
    no_documents_verdict,
    to_scopeguard,
    trace_verdicts,
    verdict_metadata,
    with_verdict,
)
from scopeguard import Verdict

__all__ = ["aguard_documents", "guard_documents"]


def _empty_verdict(guard: AnyGuard) -> Verdict:
    return no_documents_verdict(guard).model_copy(update={"rationale": "the document is empty"})


def _apply(
    guard: AnyGuard,
    documents: Sequence[LCDocument],
    verdicts: Sequence[Verdict],
    *,
    drop: bool,
    key: str,
) -> tuple[list[LCDocument], list[dict[str, Any]]]:
    """Attach ``verdicts[i]`` to ``documents[i]``; drop the out-of-scope ones when asked.

    Also returns the distinct verdicts' metadata, for tracing (one entry for a set verdict)."""
    out = []
    traced: dict[int, dict[str, Any]] = {}
    for doc, verdict in zip(documents, verdicts, strict=True):
        oos, closed = guard.decide(verdict)
        meta = traced.setdefault(
            id(verdict), verdict_metadata(verdict, out_of_scope=oos, failed_closed=closed)
        )
        if drop and oos:
            continue
        out.append(with_verdict(doc, meta, key))
    return out, list(traced.values())


def guard_documents(
    guard: AnyGuard,
    query: str,
    documents: Sequence[LCDocument],
    *,
    granularity: Granularity,
    drop: bool,
    key: str,
    callbacks: Callbacks = None,
) -> list[LCDocument]:
    """Check ``documents`` against ``query``; each verdict is also traced as a child run of
    ``callbacks`` (:func:`~langchain_scopeguard._common.trace_verdicts`)."""
    if not documents:
        return []
    if granularity == "set":
        docs = to_scopeguard(documents)
        verdict = guard.check(query, docs) if docs else no_documents_verdict(guard)
        verdicts = [verdict] * len(documents)
    else:
        verdicts = [
            guard.check(query, docs) if (docs := to_scopeguard([d])) else _empty_verdict(guard)
            for d in documents
        ]
    out, traced = _apply(guard, documents, verdicts, drop=drop, key=key)
    trace_verdicts(callbacks, traced)
    return out


async def aguard_documents(
    guard: AnyGuard,
    query: str,
    documents: Sequence[LCDocument],
    *,
    granularity: Granularity,
    drop: bool,
    key: str,
    callbacks: Callbacks = None,
) -> list[LCDocument]:
    """Check ``documents`` against ``query``; each verdict is also traced as a child run of
    ``callbacks`` (:func:`~langchain_scopeguard._common.trace_verdicts`)."""
    if not documents:
        return []
    if granularity == "set":
        docs = to_scopeguard(documents)
        verdict = await guard.acheck(query, docs) if docs else no_documents_verdict(guard)
        verdicts = [verdict] * len(documents)
    else:
        sem = asyncio.Semaphore(guard.concurrency)

        async def one(doc: LCDocument) -> Verdict:
            docs = to_scopeguard([doc])
            if not docs:
                return _empty_verdict(guard)
            async with sem:
                return await guard.acheck(query, docs)

        verdicts = list(await asyncio.gather(*(one(d) for d in documents)))
    out, traced = _apply(guard, documents, verdicts, drop=drop, key=key)
    await atrace_verdicts(callbacks, traced)
    return out
