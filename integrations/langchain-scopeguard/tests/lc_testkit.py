"""Shared test helpers (a uniquely named module, so it never clashes with tests/ of the core)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from scopeguard import BaseDetector, DetectionError, Document, Verdict

# A tiny invented corpus (no text from any data set).
CORPUS = (
    "The Brindle Valley railway opened in 1887 and carried slate from the quarries to Porthwen harbour.",
    "Porthwen harbour has a stone breakwater; fishing boats land mackerel there every summer.",
    "The quarry at Carreg Ddu closed in 1962 after the market for roofing slate collapsed.",
)
IN_SCOPE = "When did the Brindle Valley railway open?"
OUT_OF_SCOPE = "Who was the chief engineer of the Brindle Valley railway?"

_STOP_WORDS = "when where how do does did the who was what of a an in to is there"
_STOP = frozenset(_STOP_WORDS.split())


class CoverageDetector(BaseDetector):
    """In scope iff every content word of the question occurs in the documents.

    ``delay`` makes ``_adetect`` await ``asyncio.sleep`` and records how many calls overlap.
    """

    name = "coverage"

    def __init__(self, *, delay: float = 0.0) -> None:
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0
        self._lock = threading.Lock()

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        with self._lock:
            self.calls += 1
        text = " ".join(d.text.lower() for d in documents)
        words = [w for w in re.findall(r"[a-z0-9]+", question.lower()) if w not in _STOP]
        missing = tuple(w for w in words if w not in text)
        return Verdict(
            label="out_of_scope" if missing else "in_scope",
            score=1.0 if missing else 0.0,
            uncovered=missing,
        )

    async def _adetect(self, question: str, documents: Sequence[Document]) -> Verdict:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            return self._detect(question, documents)
        finally:
            self.in_flight -= 1


class FailingDetector(BaseDetector):
    name = "failing"

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        raise DetectionError("detector backend is down")


class RunRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.retrievers: list[tuple[UUID, UUID | None]] = []
        self.chains: list[tuple[str, UUID, UUID | None]] = []

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.retrievers.append((run_id, parent_run_id))

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self.chains.append((kw.get("name") or "", run_id, parent_run_id))
