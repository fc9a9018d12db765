"""Shared test helpers (a uniquely named module, so it never clashes with tests/ of the core)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

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
        self._lock = threading.Lock()

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        text = " ".join(d.text.lower() for d in documents)
        words = [w for w in re.findall(r"[a-z0-9]+", question.lower()) if w not in _STOP]
        missing = tuple(w for w in words if w not in text)
        return Verdict(
            label="out_of_scope" if missing else "in_scope", score=1.0 if missing else 0.0, uncovered=missing
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


@contextmanager
def record_spans() -> Iterator[SimpleSpanHandler]:
    """Record LlamaIndex instrumentation spans (id and parent id) while the block runs."""
    dispatcher = get_dispatcher()
    handler = SimpleSpanHandler()
    dispatcher.add_span_handler(handler)
    try:
        yield handler
    finally:
        dispatcher.span_handlers.remove(handler)


def ancestors(handler: SimpleSpanHandler, span_id: str) -> list[str]:
    parents = {s.id_: s.parent_id for s in handler.completed_spans}
    out = []
    while (span_id := parents.get(span_id)) is not None:  # type: ignore[assignment]
        out.append(span_id)
    return out


@contextmanager
def record_events() -> Iterator[list[Any]]:
    """Record LlamaIndex instrumentation events while the block runs."""
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    events: list[Any] = []

    class _Recorder(BaseEventHandler):
        def handle(self, event: Any, **kwargs: Any) -> None:
            events.append(event)

    dispatcher = get_dispatcher()
    handler = _Recorder()
    dispatcher.add_event_handler(handler)
    try:
        yield events
    finally:
        dispatcher.event_handlers.remove(handler)
