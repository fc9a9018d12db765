"""The detector protocol and a base class that validates input and times every call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from scopeguard.types import Document, Verdict, as_documents, validate_question

__all__ = ["BaseDetector", "Detector", "Prereader"]


@runtime_checkable
class Detector(Protocol):
    """Decides whether ``question`` is in scope for the retrieved ``documents``."""

    @property
    def name(self) -> str: ...

    def detect(self, question: str, documents: str | Document | Iterable[str | Document]) -> Verdict: ...

    async def adetect(
        self, question: str, documents: str | Document | Iterable[str | Document]
    ) -> Verdict: ...


@runtime_checkable
class Prereader(Protocol):
    """A detector that can read documents ahead of the questions and keep what it read (``default``
    and ``logprob`` with llama.cpp): a later question about them costs only its own tokens."""

    def preread(self, documents: Sequence[Document | str], *, progress: bool | None = None) -> int:
        """Read ``documents`` now; returns the passages whose state is kept (0: none kept)."""
        ...


class BaseDetector:
    """Implement :meth:`_detect` (and optionally :meth:`_adetect`).

    ``detect`` validates the question and documents (raising
    :class:`~scopeguard.errors.InputError`), calls ``_detect`` and stamps the detector name
    and latency on the verdict.
    """

    name: str = "detector"

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        raise NotImplementedError

    async def _adetect(self, question: str, documents: Sequence[Document]) -> Verdict:
        return await asyncio.to_thread(self._detect, question, documents)

    def _stamp(self, verdict: Verdict, started: float) -> Verdict:
        return verdict.model_copy(
            update={
                "detector": verdict.detector or self.name,
                "latency_ms": (time.perf_counter() - started) * 1000.0,
            }
        )

    def detect(self, question: str, documents: str | Document | Iterable[str | Document]) -> Verdict:
        q = validate_question(question)
        docs = as_documents(documents)
        started = time.perf_counter()
        return self._stamp(self._detect(q, docs), started)

    async def adetect(self, question: str, documents: str | Document | Iterable[str | Document]) -> Verdict:
        q = validate_question(question)
        docs = as_documents(documents)
        started = time.perf_counter()
        return self._stamp(await self._adetect(q, docs), started)
