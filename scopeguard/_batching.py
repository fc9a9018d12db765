"""Many (question, documents) pairs through one guard: :class:`Batching`, a base of ``Guard``.

``abatch`` runs them concurrently (at most ``concurrency`` at once), ``batch`` is its sync
wrapper; one failing item never costs the others their results.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from scopeguard.errors import ConfigurationError, ScopeGuardError, error_kind
from scopeguard.types import Action, Document, GuardResult, Verdict, as_documents

__all__ = ["Batching", "failed_verdict"]

logger = logging.getLogger("scopeguard.guard")

Docs = str | Document | Iterable[str | Document]


class Batching:
    """``abatch`` / ``batch`` over a guard's ``aanswer`` and ``acheck``."""

    if TYPE_CHECKING:
        detector: Any
        on_error: str
        concurrency: int

        async def aanswer(self, question: str, documents: Docs) -> GuardResult: ...

        async def acheck(self, question: str, documents: Docs) -> Verdict: ...

        def _failed_step(self, exc: ScopeGuardError, stage: str, result: GuardResult) -> GuardResult: ...

    def _failed_item(
        self, question: object, documents: Docs, exc: ScopeGuardError, answer: bool
    ) -> GuardResult | Verdict:
        """The record of a batch item that raised before a verdict (for example an empty question)."""
        logger.warning("batch item %r failed: %s", question, exc)
        verdict = failed_verdict(self.detector, exc)
        if not answer:
            return verdict
        try:
            docs: tuple[Document, ...] = as_documents(documents)
        except ScopeGuardError:
            docs = ()
        result = GuardResult(question=str(question), verdict=verdict, action=Action.REFUSED, documents=docs)
        return self._failed_step(exc, "input", result)

    async def abatch(
        self, items: Iterable[tuple[str, Docs]], *, answer: bool = True, concurrency: int | None = None
    ) -> list[GuardResult | Verdict]:
        """Run many (question, documents) pairs concurrently, at most ``concurrency`` at once.

        One failing item never costs the others their results: an item that raises a
        ScopeGuardError (an empty question, ...) gets a failed-closed record with the error.
        With ``on_error="raise"`` (or on a ConfigurationError) the first error is raised once
        every item has finished.
        """
        sem = asyncio.Semaphore(concurrency or self.concurrency)

        async def one(q: str, d: Docs) -> GuardResult | Verdict:
            async with sem:
                try:
                    return await (self.aanswer(q, d) if answer else self.acheck(q, d))
                except ScopeGuardError as exc:
                    if self.on_error == "raise" or isinstance(exc, ConfigurationError):
                        raise
                    return self._failed_item(q, d, exc, answer)

        results: list[GuardResult | Verdict] = []
        for outcome in await asyncio.gather(*(one(q, d) for q, d in items), return_exceptions=True):
            if isinstance(outcome, BaseException):
                raise outcome
            results.append(outcome)
        return results

    def batch(
        self, items: Iterable[tuple[str, Docs]], *, answer: bool = True, concurrency: int | None = None
    ) -> list[GuardResult | Verdict]:
        """Sync wrapper of :meth:`abatch` (must not be called from a running event loop)."""
        return asyncio.run(self.abatch(items, answer=answer, concurrency=concurrency))


def failed_verdict(detector: Any, exc: BaseException) -> Verdict:
    """The ``unknown`` verdict of a failed check, naming the error and its kind."""
    return Verdict(
        label="unknown", detector=getattr(detector, "name", ""), error=str(exc), error_kind=error_kind(exc)
    )
