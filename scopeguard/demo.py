"""The offline demo: a small guarded RAG over an invented corpus that ships with the package.

Retrieval is BM25 over four short documents about the fictional town of Marlow Bay; the
guard's detector decides each question; in-scope questions are answered by the local LLM
(or, with ``llm=None``, by quoting the best-matching sentence), out-of-scope ones get the
policy's response.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from scopeguard.guard import Guard
from scopeguard.llm.base import ChatModel
from scopeguard.types import Document, GuardResult

__all__ = ["DemoCase", "demo_corpus", "extractive_answer", "run_demo"]


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


_WORD = re.compile(r"[a-z0-9]+")


def extractive_answer(question: str, documents: Sequence[Document]) -> str:
    """Quote the sentence that shares the most words with the question (the no-LLM responder)."""
    q = set(_WORD.findall(question.lower()))
    best, best_overlap = "", -1
    for doc in documents:
        for sentence in re.split(r"(?<=[.!?])\s+", doc.text):
            overlap = len(q & set(_WORD.findall(sentence.lower())))
            if overlap > best_overlap:
                best, best_overlap = sentence, overlap
    return f'From the documents: "{best}"'


def run_demo(
    *, detector: str = "default", policy: str = "clarify", llm: str | ChatModel | None = None, k: int = 2
) -> list[DemoCase]:
    """Index the demo corpus, guard every demo question, and return the results."""
    from scopeguard.retrieval import get_retriever

    docs, questions = demo_corpus()
    retriever = get_retriever("bm25")
    retriever.index(docs)
    guard = Guard(detector=detector, policy=policy, llm=llm)
    responder = None if llm is not None else extractive_answer
    cases = []
    for question, expected in questions:
        hits = retriever.search(question, k=k)
        result = guard.answer(question, [h.document for h in hits], responder=responder)
        cases.append(DemoCase(question, expected, result))
    return cases
