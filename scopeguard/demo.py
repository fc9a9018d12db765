"""The offline demo: a small guarded RAG over an invented corpus that ships with the package.

Retrieval is BM25 over four short documents about the fictional town of Marlow Bay; the
guard's detector decides each question; in-scope questions are answered by the local LLM
(or, with ``llm=None``, by quoting the best-matching sentence), out-of-scope ones get the
policy's response.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources

from scopeguard.guard import Guard
from scopeguard.llm.base import ChatModel
from scopeguard.types import Document, GuardResult

__all__ = ["DemoCase", "demo_corpus", "extractive_answer", "iter_demo", "run_demo"]


@dataclass(frozen=True)
class DemoCase:
    question: str
    expected: str
    result: GuardResult


def demo_corpus() -> tuple[list[Document], list[tuple[str, str]]]:
    """The shipped documents and the (question, expected label) pairs."""
    raw = json.loads(resources.files("scopeguard._assets").joinpath("demo_corpus.json").read_text("utf-8"))
    docs = [Document(id=d["id"], text=d["text"], metadata={"title": d["title"]}) for d in raw["documents"]]
    return docs, [(q["question"], q["expected"]) for q in raw["questions"]]


def extractive_answer(question: str, documents: Sequence[Document]) -> str:
    """Quote the sentence sharing the most content words with the question (the no-LLM responder).

    The document's first sentence (its headline in the demo corpus) is skipped.
    """
    from scopeguard.detection.read.text import content_stems, sentence_windows

    q = set(content_stems(question))
    best, best_overlap = "", -1
    for doc in documents:
        for sentence in sentence_windows(doc.text)[1:]:
            overlap = len(q & set(content_stems(sentence)))
            if overlap > best_overlap:
                best, best_overlap = sentence, overlap
    return f'From the documents: "{best}"'


def iter_demo(
    *,
    detector: str = "default",
    policy: str = "clarify",
    llm: str | ChatModel | None = None,
    k: int = 2,
    progress: Callable[[str], None] | None = None,
) -> Iterator[DemoCase]:
    """Index the demo corpus and guard every demo question, yielding each result as it is ready.

    ``progress(message)`` hears each set-up step (index, detector models) before it starts.
    """
    from scopeguard.retrieval import get_retriever

    say = progress or (lambda _message: None)
    docs, questions = demo_corpus()
    say(f"indexing {len(docs)} documents (BM25)")
    retriever = get_retriever("bm25")
    retriever.index(docs)
    say(f"loading the {detector!r} detector")
    guard = Guard(detector=detector, policy=policy, llm=llm)
    load = getattr(guard.detector, "load", None)
    if callable(load):
        say("loading the detector's reading model (Qwen2.5-Coder-1.5B for 'default')")
        load()
    preread = getattr(guard.detector, "preread", None)
    if callable(preread):
        say(f"pre-reading the {len(docs)} documents for the reading model (kept for later runs)")
        preread(docs, progress=False)
    responder = None if llm is not None else extractive_answer
    for question, expected in questions:
        hits = retriever.search(question, k=k)
        result = guard.answer(question, [h.document for h in hits], responder=responder)
        yield DemoCase(question, expected, result)


def run_demo(
    *, detector: str = "default", policy: str = "clarify", llm: str | ChatModel | None = None, k: int = 2
) -> list[DemoCase]:
    """All demo results as a list (see :func:`iter_demo`)."""
    return list(iter_demo(detector=detector, policy=policy, llm=llm, k=k))
