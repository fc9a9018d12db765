"""Resumable verification runs: questions and a corpus from a dataset folder or MS MARCO TSV files.

Options -> :class:`VerificationConfig` -> :func:`run_verification` -> :class:`VerificationRunReport`.
The run folder (a :class:`~scopeguard.runs.RunFolder`) holds ``config.json`` (what was run),
``results.jsonl`` (one :class:`VerificationResult` per question, appended and fsynced as each
finishes) and, at the end, ``report.json`` / ``report.md``. Re-running into the same folder skips
the ids already done (a half-written last line from a kill is dropped); a different configuration
is refused (``limit`` may change, so a run can be extended).

``execution="batch"`` sends the LLM calls (answer -> reader -> verdict) as OpenAI Batch API jobs
in waves (:func:`scopeguard.batch.run_waves`: each question replays against the reply cache
``OUT/.cache/replies.jsonl`` until its first unanswered call; those go out as one job; the next
wave gets one step further). Job state is kept in ``OUT/.batch/``, the tokens per stage at the
batch price in ``OUT/batch_usage.json``. It needs an ``openai:`` model.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from scopeguard._progress import progress_bar
from scopeguard.batch import BatchSettings, Wave, run_waves
from scopeguard.data import load_dataset
from scopeguard.errors import ConfigurationError, InputError, LLMConnectionError, LLMError
from scopeguard.generation.batch import DeferringChatModel, batch_run
from scopeguard.llm.base import ChatModel
from scopeguard.retrieval.base import Retriever
from scopeguard.runs import JsonlLog, RunFolder
from scopeguard.types import Document
from scopeguard.verification.hybrid import make_retriever
from scopeguard.verification.loop import STAGES, AnswerVerifier, VerificationResult
from scopeguard.verification.msmarco import (
    Query,
    iter_collection,
    iter_queries,
    read_qrels,
    sample_collection,
)
from scopeguard.verification.passages import dataset_passages
from scopeguard.verification.report import RESULTS_FILE, ClassDistribution, read_results, write_run_report

__all__ = [
    "VerificationConfig",
    "VerificationRunReport",
    "load_passage_corpus",
    "load_questions",
    "run_verification",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"


class VerificationConfig(BaseModel):
    """One verification run (saved as the run folder's ``config.json``; paths as given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    questions: str
    """A dataset folder (its in-scope questions) or an MS MARCO ``queries.tsv``."""
    corpus: str
    """A dataset folder (split into passages) or a ``collection.tsv``."""
    llm: str = "local"
    retriever: str = "bm25"
    dense_model: str | None = None
    reader: bool = False
    k: int = 3
    passages: int = 1
    passage_sentences: int = 3
    max_passages: int | None = None
    qrels: str | None = None
    negatives: int | None = None
    answers_from: str | None = None
    limit: int | None = None


class VerificationRunReport(BaseModel):
    """What a run folder holds after :func:`run_verification` (and what this call added)."""

    model_config = ConfigDict(frozen=True)

    run: str
    out: str
    written: int
    distribution: ClassDistribution
    llm_calls: int
    errors: int

    @property
    def n(self) -> int:
        return self.distribution.n


def load_questions(
    path: str | os.PathLike[str], *, qrels: str | os.PathLike[str] | None = None, limit: int | None = None
) -> list[Query]:
    """In-scope questions of a dataset folder, or the queries of a ``queries.tsv`` (only those
    judged in ``qrels`` when given); the first ``limit``."""
    p = Path(path)
    if limit is not None and limit < 1:
        raise ConfigurationError(f"--limit must be >= 1, got {limit}")
    if p.is_dir():
        ds = load_dataset(p)
        queries = [Query(id=q.id, text=q.question) for q in ds.questions if q.label == "in_scope"]
    elif p.is_file():
        judged = set(read_qrels(qrels)) if qrels is not None else None
        queries = list(iter_queries(p, qids=judged))
    else:
        raise InputError(f"questions not found: {p} (expected a dataset folder or a queries.tsv)")
    if not queries:
        raise InputError(f"no questions to verify in {p}")
    return queries[:limit] if limit is not None else queries


def load_passage_corpus(
    path: str | os.PathLike[str],
    *,
    passage_sentences: int = 3,
    max_passages: int | None = None,
    qrels: str | os.PathLike[str] | None = None,
    negatives: int | None = None,
    seed: int = 0,
) -> list[Document]:
    """The passages to index: a dataset folder split into passages, or a ``collection.tsv``
    (the first ``max_passages``, or the qrels' judged passages plus ``negatives`` sampled ones)."""
    p = Path(path)
    if p.is_dir():
        docs = dataset_passages(load_dataset(p), sentences=passage_sentences)
        return docs[:max_passages] if max_passages else docs
    if not p.is_file():
        raise InputError(f"corpus not found: {p} (expected a dataset folder or a collection.tsv)")
    if negatives is not None:
        if qrels is None:
            raise ConfigurationError("--negatives samples around the judged passages: pass --qrels too")
        return sample_collection(p, read_qrels(qrels), negatives=negatives, seed=seed)
    if max_passages is None:
        logger.warning("indexing all of %s: a full MS MARCO index needs several GiB of memory", p)
    return list(iter_collection(p, limit=max_passages))


def run_verification(
    config: VerificationConfig,
    out: str | os.PathLike[str],
    *,
    llm: ChatModel | None = None,
    progress: bool | None = None,
    execution: Literal["online", "batch"] = "online",
    batch: BatchSettings | None = None,
) -> VerificationRunReport:
    """Verify the questions of ``config`` against its corpus into the folder ``out``, resuming a
    killed run there, and write its report.

    ``llm`` replaces the model named by ``config.llm`` (its spec is still what the folder records).
    ``config.answers_from`` reuses the answers of another run folder, so two runs differ only in
    retrieval or reading. An unreachable LLM aborts the run (re-run to resume); another LLM failure
    is recorded for that question as verdict ``unknown`` with the error. ``execution="batch"``
    runs the LLM calls as Batch API jobs (see the module docstring; ``batch``: polling, price factor).
    """
    if execution not in ("online", "batch"):
        raise ConfigurationError(f"execution must be 'online' or 'batch', got {execution!r}")
    questions = Path(config.questions)
    qs = load_questions(questions, qrels=config.qrels if not questions.is_dir() else None, limit=config.limit)
    if config.dense_model and config.retriever == "bm25":
        raise ConfigurationError("--dense-model applies to --retriever dense or hybrid, not bm25")
    kwargs = {"model": config.dense_model} if config.dense_model else {}
    index = make_retriever(config.retriever, **kwargs)
    verifier = AnswerVerifier(
        llm if llm is not None else config.llm,
        retriever=index,
        reader=config.reader,
        k=config.k,
        passages=config.passages,
    )
    from scopeguard.llm.openai_compat import OpenAIChatModel

    if execution == "batch" and not isinstance(verifier.llm, OpenAIChatModel):
        raise ConfigurationError(
            f"--execution batch needs an OpenAI-compatible model (openai:MODEL), not {verifier.llm.name!r}"
        )
    answers = (
        {r.id: r.answer for r in read_results(config.answers_from) if r.answer} if config.answers_from else {}
    )
    # Refuse a mismatched run folder before indexing; index only when questions are left.
    folder = RunFolder(out, VerificationConfig, config_file=CONFIG_FILE, free=("limit",))
    folder.open(config)
    results = folder.log(RESULTS_FILE)
    done = results.keys(lambda row: str(row["id"]))
    todo = [q for q in qs if q.id not in done]
    logger.info("%d question(s) to verify, %d already done", len(todo), len(qs) - len(todo))
    written = 0
    if todo:
        docs = load_passage_corpus(
            config.corpus,
            passage_sentences=config.passage_sentences,
            max_passages=config.max_passages,
            qrels=config.qrels,
            negatives=config.negatives,
        )
        logger.info("indexing %d passages with %s", len(docs), index.name)
        index.index(docs)
        if execution == "batch":
            written = _verify_in_batches(verifier, todo, index, results, answers, out=out, settings=batch)
        else:
            written = _verify_all(verifier, todo, index, results, answers, progress)
    report: dict[str, Any] = write_run_report(out)
    return VerificationRunReport(
        run=report["run"],
        out=str(out),
        written=written,
        distribution=ClassDistribution(n=report["n"], counts=report["counts"]),
        llm_calls=report["llm_calls"],
        errors=report["errors"],
    )


def _verify_all(
    verifier: AnswerVerifier,
    todo: Sequence[Query],
    retriever: Retriever,
    results: JsonlLog,
    answers: dict[str, str],
    progress: bool | None,
) -> int:
    """Verify ``todo`` one by one, appending each result; returns how many were written."""
    written = 0
    for q in progress_bar(todo, desc="verify", enabled=progress):
        results.append(_verify_one(verifier, q, retriever, answers))
        written += 1
    return written


def _verify_one(
    verifier: AnswerVerifier, q: Query, retriever: Retriever, answers: dict[str, str]
) -> VerificationResult:
    """One question's result; an LLM failure (not a lost connection) is verdict ``unknown``."""
    try:
        return verifier.verify(q.text, answers.get(q.id), retriever, id=q.id)
    except LLMConnectionError:
        raise
    except LLMError as exc:
        logger.warning("question %s: %s", q.id, exc)
        return VerificationResult(id=q.id, question=q.text, answer="", verdict="unknown", error=str(exc))


def _verify_in_batches(
    verifier: AnswerVerifier,
    todo: Sequence[Query],
    retriever: Retriever,
    results: JsonlLog,
    answers: dict[str, str],
    *,
    out: str | os.PathLike[str],
    settings: BatchSettings | None,
) -> int:
    """Verify ``todo`` in waves of Batch API jobs, appending each result as its question finishes."""
    cache, jobs, usage = batch_run(out, settings)
    written = 0

    async def attempt(q: Query, wave: Wave) -> None:
        nonlocal written
        llm = DeferringChatModel(verifier.llm, cache, wave=wave)  # the question's own count
        replayed = copy.copy(verifier)
        replayed.stage_llms = {stage: llm.for_step(stage) for stage in STAGES}
        results.append(_verify_one(replayed, q, retriever, answers))
        usage.add(llm.ledger, verifier.llm.name)
        usage.save(out)
        written += 1

    try:
        asyncio.run(run_waves(todo, attempt, models=[verifier.llm], cache=cache, jobs=jobs))
    finally:
        cache.close()
    return written
