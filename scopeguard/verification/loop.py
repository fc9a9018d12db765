"""Verify an LLM's answer against a corpus (Huo, Arabzadeh & Clarke, MS MARCO answer verification).

The loop, per question (paper, Figure 1):

1. answer the question (Figure 2 prompt), unless the answer is given;
2. retrieve with the combined query ``question + " " + answer`` (top ``k`` passages kept as evidence);
3. optionally let the LLM act as a reader that extracts a concise answer from the top
   ``passages`` passages (Figure 3);
4. ask the LLM whether the generated answer and the retrieved (or read) answer agree (Figure 4):
   Yes -> ``supported``, No -> ``contradicted`` (a hallucination), Not Related -> ``not_related``;
   an unparseable reply is ``unknown``.

The steps are written once as a generator that yields what it needs (an LLM call or a search);
:meth:`AnswerVerifier.verify` and :meth:`AnswerVerifier.averify` only drive it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from scopeguard.errors import ConfigurationError, InputError
from scopeguard.llm.base import ChatModel
from scopeguard.llm.registry import from_spec
from scopeguard.prompts import render, render_documents
from scopeguard.retrieval.base import Hit, Retriever
from scopeguard.types import Document, as_documents, validate_question
from scopeguard.verification.hybrid import make_retriever
from scopeguard.verification.parsing import VerificationLabel, parse_verification
from scopeguard.verification.passages import iter_passages

__all__ = ["AnswerVerifier", "Evidence", "Source", "VerificationResult"]

logger = logging.getLogger(__name__)

Source = Retriever | str | Document | Iterable[str | Document]
"""What an answer is verified against: an indexed retriever, or documents (split into passages)."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Evidence(_Record):
    """One retrieved passage: its id, text, retrieval score and 1-based rank."""

    id: str
    text: str
    score: float
    rank: int


class VerificationResult(_Record):
    """The outcome of verifying one answer.

    ``compared`` is the text the classifier saw as "Answer2" (the reader's answer, or the top
    passage(s) when there is no reader). ``rationale`` is the classifier's raw reply.
    """

    question: str
    answer: str
    verdict: VerificationLabel
    id: str = ""
    query: str = ""
    evidence: tuple[Evidence, ...] = ()
    reader_answer: str | None = None
    compared: str = ""
    rationale: str = ""
    retriever: str = ""
    llm_calls: int = 0
    latency_ms: float = 0.0
    error: str | None = None

    @property
    def is_hallucination(self) -> bool:
        """True when the corpus contradicts the answer (the paper's "No")."""
        return self.verdict == "contradicted"


@dataclass(frozen=True)
class _Ask:
    prompt: str
    max_tokens: int
    stage: str


STAGES = ("answer", "reader", "classify")
"""The LLM calls of the loop (:attr:`AnswerVerifier.stage_llms` may give each its own model)."""


@dataclass(frozen=True)
class _Search:
    query: str
    k: int


_Step = Generator[_Ask | _Search, Any, VerificationResult]


class AnswerVerifier:
    """Check generated answers against a corpus with the paper's three-prompt loop.

    Args:
        llm: the LLM that answers, reads and classifies (a ChatModel or a spec such as ``"local"``).
        retriever: the corpus to verify against: an indexed :class:`Retriever`, or ``None`` to pass
            a source to each :meth:`verify` call.
        reader: extract a concise answer from the passage(s) before comparing (paper, Section 2.2).
        k: passages retrieved and kept as evidence.
        passages: how many of the top passages the reader / classifier sees (the paper: 1).
        documents_retriever: the retriever built when :meth:`verify` gets documents instead of a
            retriever (a name for :func:`~scopeguard.verification.make_retriever`).
        passage_sentences: sentences per passage when documents are split.
        answer_max_tokens, reader_max_tokens, classify_max_tokens: generation limits per step.
        stage_llms: a model per stage (``answer``, ``reader``, ``classify``) used instead of
            ``llm`` for that stage (batch mode books each stage's tokens this way).
    """

    def __init__(
        self,
        llm: str | ChatModel = "local",
        *,
        retriever: Retriever | None = None,
        reader: bool = False,
        k: int = 3,
        passages: int = 1,
        documents_retriever: str = "bm25",
        passage_sentences: int = 3,
        answer_max_tokens: int = 128,
        reader_max_tokens: int = 160,
        classify_max_tokens: int = 16,
        stage_llms: Mapping[str, ChatModel] | None = None,
    ) -> None:
        if k < 1:
            raise ConfigurationError(f"k must be >= 1, got {k}")
        if not 1 <= passages <= k:
            raise ConfigurationError(f"passages must be between 1 and k={k}, got {passages}")
        if retriever is not None and not isinstance(retriever, Retriever):
            raise ConfigurationError(
                f"retriever must implement the Retriever protocol, got {type(retriever).__name__}"
            )
        self.llm: ChatModel = from_spec(llm)
        self.retriever = retriever
        self.reader = reader
        self.k = k
        self.passages = passages
        self.documents_retriever = documents_retriever
        self.passage_sentences = passage_sentences
        self.answer_max_tokens = answer_max_tokens
        self.reader_max_tokens = reader_max_tokens
        self.classify_max_tokens = classify_max_tokens
        unknown = sorted(set(stage_llms or {}) - set(STAGES))
        if unknown:
            raise ConfigurationError(f"unknown stage(s) {unknown} in stage_llms; stages: {', '.join(STAGES)}")
        self.stage_llms: dict[str, ChatModel] = dict(stage_llms or {})

    def llm_for(self, stage: str) -> ChatModel:
        """The model that makes the ``stage`` call."""
        return self.stage_llms.get(stage, self.llm)

    # -- the loop, written once ------------------------------------------------------------
    def _steps(self, question: str, answer: str | None, retriever_name: str, qid: str) -> _Step:
        calls = 0
        if answer is None:
            answer = yield _Ask(render("verify_answer", question=question), self.answer_max_tokens, "answer")
            calls += 1
        answer = (answer or "").strip()
        base: dict[str, Any] = {
            "id": qid,
            "question": question,
            "answer": answer,
            "retriever": retriever_name,
        }
        if not answer:
            return VerificationResult(**base, verdict="unknown", llm_calls=calls, error="the answer is empty")
        query = f"{question} {answer}"
        hits: list[Hit] = yield _Search(query, self.k)
        evidence = tuple(
            Evidence(id=h.document.id, text=h.document.text, score=h.score, rank=h.rank) for h in hits
        )
        base.update(query=query, evidence=evidence)
        if not hits:
            return VerificationResult(
                **base, verdict="unknown", llm_calls=calls, error="no passage matched the combined query"
            )
        passage = render_documents([h.document for h in hits[: self.passages]])
        compared, reader_answer = passage, None
        if self.reader:
            reader_answer = yield _Ask(
                render("verify_reader", question=question, passage=passage), self.reader_max_tokens, "reader"
            )
            calls += 1
            reader_answer = (reader_answer or "").strip()
            compared = reader_answer or passage  # an empty reading falls back to the passage itself
        reply = yield _Ask(
            render("verify_classify", question=question, llm_answer=answer, retriever_answer=compared),
            self.classify_max_tokens,
            "classify",
        )
        calls += 1
        verdict = parse_verification(reply)
        return VerificationResult(
            **base,
            verdict=verdict,
            reader_answer=reader_answer,
            compared=compared,
            rationale=(reply or "").strip(),
            llm_calls=calls,
            error=None if verdict != "unknown" else "the classifier's reply names no class",
        )

    def retriever_for(self, source: Source | None, *, split: bool = True) -> Retriever:
        """The retriever to verify against: ``source`` when it is one, else a new
        ``documents_retriever`` indexed on the documents (split into passages unless ``split=False``)."""
        if source is None:
            if self.retriever is None:
                raise ConfigurationError(
                    "nothing to verify against: pass documents or a retriever to verify(), "
                    "or retriever= to AnswerVerifier"
                )
            return self.retriever
        if isinstance(source, Retriever):
            return source
        docs = as_documents(source)
        passages = list(iter_passages(docs, sentences=self.passage_sentences)) if split else list(docs)
        if not passages:
            raise InputError("the documents contain no text to split into passages")
        retriever = make_retriever(self.documents_retriever)
        retriever.index(passages)
        return retriever

    def _start(self, question: str, answer: str | None) -> tuple[str, str | None]:
        q = validate_question(question)
        if answer is not None and not isinstance(answer, str):
            raise InputError(f"answer must be a string or None, got {type(answer).__name__}")
        return q, answer

    # -- drivers ---------------------------------------------------------------------------
    def verify(
        self, question: str, answer: str | None = None, source: Source | None = None, *, id: str = ""
    ) -> VerificationResult:
        """Verify ``answer`` (generated with the Figure 2 prompt when ``None``) against ``source``."""
        t0 = time.perf_counter()
        q, answer = self._start(question, answer)
        retriever = self.retriever_for(source)
        steps = self._steps(q, answer, retriever.name, id)
        try:
            step = next(steps)
            while True:
                if isinstance(step, _Ask):
                    llm = self.llm_for(step.stage)
                    reply = llm.complete(step.prompt, temperature=0.0, max_tokens=step.max_tokens).text
                    step = steps.send(reply)
                else:
                    step = steps.send(retriever.search(step.query, step.k))
        except StopIteration as done:
            result: VerificationResult = done.value
        return result.model_copy(update={"latency_ms": (time.perf_counter() - t0) * 1000})

    async def averify(
        self, question: str, answer: str | None = None, source: Source | None = None, *, id: str = ""
    ) -> VerificationResult:
        """Async twin of :meth:`verify` (LLM calls via ``acomplete``, searches in a worker thread)."""
        t0 = time.perf_counter()
        q, answer = self._start(question, answer)
        retriever = await asyncio.to_thread(self.retriever_for, source)
        steps = self._steps(q, answer, retriever.name, id)
        try:
            step = next(steps)
            while True:
                if isinstance(step, _Ask):
                    completion = await self.llm_for(step.stage).acomplete(
                        step.prompt, temperature=0.0, max_tokens=step.max_tokens
                    )
                    step = steps.send(completion.text)
                else:
                    step = steps.send(await asyncio.to_thread(retriever.search, step.query, step.k))
        except StopIteration as done:
            result: VerificationResult = done.value
        return result.model_copy(update={"latency_ms": (time.perf_counter() - t0) * 1000})
