"""Check retrieved LangChain documents against a question; annotate and optionally drop them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from langchain_core.documents import Document as LCDocument

from langchain_scopeguard._common import (
    Granularity,
    no_documents_verdict,
    to_scopeguard,
    verdict_metadata,
    with_verdict,
)
from scopeguard import Guard, Verdict

__all__ = ["aguard_documents", "guard_documents"]


def _empty_verdict(guard: Guard) -> Verdict:
    return no_documents_verdict(guard).model_copy(update={"rationale": "the document is empty"})


def _apply(
    guard: Guard,
    documents: Sequence[LCDocument],
    verdicts: Sequence[Verdict],
    *,
    drop: bool,
    key: str,
) -> list[LCDocument]:
    """Attach ``verdicts[i]`` to ``documents[i]``; drop the out-of-scope ones when asked."""
    out = []
    for doc, verdict in zip(documents, verdicts, strict=True):
        oos, closed = guard.decide(verdict)
        if drop and oos:
            continue
        out.append(with_verdict(doc, verdict_metadata(verdict, out_of_scope=oos, failed_closed=closed), key))
    return out


def guard_documents(
    guard: Guard,
    query: str,
    documents: Sequence[LCDocument],
    *,
    granularity: Granularity,
    drop: bool,
    key: str,
) -> list[LCDocument]:
    if not documents:
        return []
    if granularity == "set":
        docs = to_scopeguard(documents)
        verdict = guard.check(query, docs) if docs else no_documents_verdict(guard)
        return _apply(guard, documents, [verdict] * len(documents), drop=drop, key=key)
    verdicts = [
        guard.check(query, docs) if (docs := to_scopeguard([d])) else _empty_verdict(guard) for d in documents
    ]
    return _apply(guard, documents, verdicts, drop=drop, key=key)


async def aguard_documents(
    guard: Guard,
    query: str,
    documents: Sequence[LCDocument],
    *,
    granularity: Granularity,
    drop: bool,
    key: str,
) -> list[LCDocument]:
    if not documents:
        return []
    if granularity == "set":
        docs = to_scopeguard(documents)
        verdict = await guard.acheck(query, docs) if docs else no_documents_verdict(guard)
        return _apply(guard, documents, [verdict] * len(documents), drop=drop, key=key)
    sem = asyncio.Semaphore(guard.concurrency)

    async def one(doc: LCDocument) -> Verdict:
        docs = to_scopeguard([doc])
        if not docs:
            return _empty_verdict(guard)
        async with sem:
            return await guard.acheck(query, docs)

    verdicts = await asyncio.gather(*(one(d) for d in documents))
    return _apply(guard, documents, verdicts, drop=drop, key=key)
