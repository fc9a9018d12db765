"""The generator: runs Algorithm 1 over a corpus, concurrently, resumably, with accounting.

Layout of an output folder::

    OUT/documents.jsonl, OUT/questions.jsonl   canonical dataset (rebuilt from the checkpoints)
    OUT/run.json                               the settings; a resume with other settings is refused
    OUT/.checkpoints/<doc>.json                one per finished document (written atomically)
    OUT/.cache/replies.jsonl                   every LLM reply, with the id provenance refers to

Re-running on the same folder skips finished documents and replays cached replies, so a killed run
resumes where it stopped with no lost or duplicated questions.

Execution: ``online`` (the default) sends each request as it comes, ``concurrency`` documents at
a time, or with ``concurrency="auto"`` as many requests as an AIMD limiter allows
(:mod:`scopeguard.llm.concurrency`: grows while latency holds, halves on 429s). ``batch`` runs the
same pipeline in waves of OpenAI Batch API jobs (:mod:`scopeguard.generation.batch`; their state
is kept in ``OUT/.batch/``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from scopeguard._progress import show_progress
from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError, LLMError, ScopeGuardError
from scopeguard.generation.accounting import PRICES_DATE, Usage, estimate_cost
from scopeguard.generation.cache import RecordingChatModel, ReplyCache, UsageLedger
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord
from scopeguard.generation.config import OFFLINE_MODES, GenerationConfig
from scopeguard.generation.corpus import Corpus, LengthRule, load_generation_corpus
from scopeguard.generation.steps import generate_document
from scopeguard.llm.base import ChatModel
from scopeguard.llm.concurrency import AdaptiveLimiter, LimitedChatModel
from scopeguard.llm.registry import from_spec
from scopeguard.runs import RunFolder
from scopeguard.types import Document

if TYPE_CHECKING:  # the Batch API layer (and the openai SDK it needs) loads only for batch runs
    from scopeguard.batch import BatchSettings
    from scopeguard.generation.batch import RunDocument

__all__ = ["GenerationRunConfig", "Generator", "RunSummary"]

logger = logging.getLogger(__name__)
JudgeSpec = Detector | Callable[[ChatModel], Detector] | None
_REBUILD_EVERY_S = 60.0
_REBUILD_SHARE = 0.05  # periodic rebuilds of the outputs take at most this share of the run


class GenerationRunConfig(GenerationConfig):
    """The settings of a run folder (``run.json``): :class:`GenerationConfig` plus the models and
    the filter; a resume with other settings is refused."""

    model: str
    judge_model: str
    filter_with: str


class RunSummary(BaseModel):
    """What a run did (``*_run``) and what the folder holds now (the rest)."""

    model_config = ConfigDict(frozen=True)

    out_dir: str
    model: str
    mode: str
    execution: str = "online"
    docs_in_corpus: int
    docs_skipped: int
    docs_done_run: int
    docs_resumed: int
    docs_failed: int
    docs_errored_run: int
    docs_done: int
    oos_kept: int
    oos_filtered: int
    in_scope: int
    # finished documents with both kinds of question, and those missing one (their checkpoints say why)
    docs_with_both: int = 0
    docs_without_oos: int = 0
    docs_without_in_scope: int = 0
    # documents an offline mode found unusable (empty, one sentence, not English, longer than the
    # model's context): no questions, a reason in their checkpoints (``error``)
    docs_unusable: int = 0
    usage_run: Usage
    usage_total: Usage
    cost_usd_run: float | None
    cost_usd_total: float | None
    seconds: float

    def table(self) -> str:
        cost = (
            f"${self.cost_usd_run:.4f} this run, ${self.cost_usd_total:.4f} in total "
            f"(estimate, prices of {PRICES_DATE}"
            + (", Batch API price factor applied)" if self.execution == "batch" else ")")
            if self.cost_usd_run is not None and self.cost_usd_total is not None
            else "n/a (no price for this model)"
        )
        u, t = self.usage_run, self.usage_total
        rows = [
            ("output", self.out_dir),
            ("model / mode", f"{self.model} / {self.mode} ({self.execution})"),
            (
                "documents",
                f"{self.docs_done} done ({self.docs_done_run} this run, {self.docs_resumed} resumed), "
                f"{self.docs_skipped} skipped, {self.docs_unusable} unusable, {self.docs_failed} failed, "
                f"{self.docs_errored_run} errored this run",
            ),
            (
                "questions",
                f"{self.oos_kept} out-of-scope kept, {self.oos_filtered} filtered, {self.in_scope} in-scope",
            ),
            (
                "coverage",
                f"{self.docs_with_both} of {self.docs_done} done documents have both kinds "
                f"({self.docs_without_oos} without an out-of-scope question, "
                f"{self.docs_without_in_scope} without an in-scope one)",
            ),
            (
                "LLM calls",
                f"{u.calls - u.cached} new + {u.cached} cached this run; {t.calls} in total; "
                f"{u.truncated} replies cut at the token cap this run ({t.truncated} in total)",
            ),
            (
                "tokens",
                f"{u.prompt_tokens} prompt + {u.completion_tokens} completion this run; "
                f"{t.total_tokens} in total",
            ),
            ("cost", cost),
            ("time", f"{self.seconds:.1f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _weak_judge(llm: ChatModel) -> bool:
    from scopeguard.models import is_packaged_gguf

    path = getattr(llm, "path", None)
    return path is not None and is_packaged_gguf(path)


def _default_judge(config: GenerationConfig) -> Callable[[ChatModel], Detector]:
    def factory(llm: ChatModel) -> Detector:
        from scopeguard.detection.detectors.judge import JudgeDetector

        return JudgeDetector(
            llm,
            votes=config.judge_votes,
            temperature=config.judge_temperature,
            adaptive=True,
            followup=config.judge_followup,
            max_tokens=config.judge_max_tokens,
        )

    return factory


class Generator:
    """ELOQ's guided-hallucination generator.

    ``llm`` writes the questions (a spec such as ``"local"`` or ``"openai:gpt-4o-mini"``, or a
    :class:`ChatModel`). ``judge`` filters out answerable questions (Algorithm 1 step 10). ``"auto"``
    (the default) is the LLM judge, except when the judge LLM is one of the small packaged GGUF
    models, whose out-of-scope judgement is near chance on the ELOQ dev split (accuracy 0.30-0.51,
    see ``benchmarks/judge_voting.py``): then the offline ``fast`` detector (0.90) filters instead.
    ``"judge"`` (or ``"default"``, the paper's filter) is
    :class:`~scopeguard.detection.detectors.judge.JudgeDetector` on ``judge_llm`` (default: ``llm``); another
    string names a registered detector (``"fast"``, ``"lexical"``, ...: offline and free); a
    callable ``ChatModel -> Detector`` gets the recording judge LLM, so its replies are cached and
    booked; a :class:`Detector` is used as is; ``None`` disables the filter.

    ``config.mode`` ``"auto"`` (the default) becomes ``"offline"`` when ``llm`` is a packaged GGUF
    model and ``"faithful"`` (the paper's Algorithm 1) otherwise; with an offline mode the
    ``"auto"`` filter is the ``logprob`` detector (the packaged 1.5B model's Yes/No verdict).

    ``concurrency`` is the number of documents processed at a time (default: 1 with an in-process
    llama.cpp model, whose calls run one at a time and whose prefix cache documents taken in turn
    would defeat; 4 otherwise), or ``"auto"``: every document
    may start and an AIMD limiter (:class:`~scopeguard.llm.concurrency.AdaptiveLimiter`) bounds the
    requests in flight, for servers such as vLLM. ``execution="batch"`` sends the requests as
    OpenAI Batch API jobs in waves instead (``batch`` sets polling and the price factor; see
    :mod:`scopeguard.generation.batch`); it needs ``openai:`` models.
    """

    def __init__(
        self,
        llm: str | ChatModel = "local",
        *,
        config: GenerationConfig | None = None,
        judge: JudgeSpec | str = "auto",
        judge_llm: str | ChatModel | None = None,
        concurrency: int | Literal["auto"] | None = None,
        execution: Literal["online", "batch"] = "online",
        batch: BatchSettings | None = None,
        progress: bool | None = None,
    ) -> None:
        if concurrency not in ("auto", None) and (not isinstance(concurrency, int) or concurrency < 1):
            raise ConfigurationError(f"concurrency must be 'auto' or at least 1, got {concurrency!r}")
        if execution not in ("online", "batch"):
            raise ConfigurationError(f"execution must be 'online' or 'batch', got {execution!r}")
        self.llm = from_spec(llm)
        self.config = (config or GenerationConfig()).resolved(self.llm)
        self.judge_llm = from_spec(judge_llm) if judge_llm is not None else self.llm
        if judge == "auto":
            if self.config.mode in OFFLINE_MODES:
                judge = "logprob"
            else:
                judge = "fast" if _weak_judge(self.judge_llm) else "judge"
            logger.info(
                "filter: %s (auto, mode %s, judge LLM %s)", judge, self.config.mode, self.judge_llm.name
            )
        elif judge == "default":
            judge = "judge"
        self.filter_name = judge if isinstance(judge, str) else getattr(judge, "name", "custom")
        if judge == "judge":
            judge = _default_judge(self.config)
        elif isinstance(judge, str):
            from scopeguard.detection.detectors.registry import get_detector

            judge = get_detector(judge)
        self.judge: JudgeSpec = judge if self.config.filter else None
        if concurrency is None:
            concurrency = 1 if getattr(self.llm, "path", None) is not None else 4  # in-process GGUF
        self.concurrency: int | Literal["auto"] = concurrency
        self.execution = execution
        self.batch = batch
        self.progress = progress

    def run(
        self,
        corpus: str | os.PathLike[str] | Iterable[Any] | Corpus,
        out_dir: str | os.PathLike[str],
        *,
        length_rule: LengthRule | None = None,
        max_docs: int | None = None,
    ) -> RunSummary:
        """Generate questions for ``corpus`` into ``out_dir`` (resuming a previous run there)."""
        return asyncio.run(self.arun(corpus, out_dir, length_rule=length_rule, max_docs=max_docs))

    def run_config(self) -> GenerationRunConfig:
        """What the run folder records (``run.json``): the models, the filter and the settings."""
        return GenerationRunConfig(
            model=self.llm.name,
            judge_model=self.judge_llm.name,
            filter_with=self.filter_name,
            **self.config.model_dump(),
        )

    async def arun(
        self,
        corpus: str | os.PathLike[str] | Iterable[Any] | Corpus,
        out_dir: str | os.PathLike[str],
        *,
        length_rule: LengthRule | None = None,
        max_docs: int | None = None,
    ) -> RunSummary:
        started = time.perf_counter()
        out = Path(out_dir)
        loaded = (
            corpus
            if isinstance(corpus, Corpus)
            else load_generation_corpus(corpus, length_rule=length_rule, max_docs=max_docs)
        )
        RunFolder(out, GenerationRunConfig, config_file="run.json").open(self.run_config())
        store = CheckpointStore(out)
        # a document is done when its checkpoint exists (the rebuild below reads and checks them all)
        done = {d.id for d in loaded.documents if store.path_for(d.id).is_file()}
        if done:
            store.rebuild()
        cache = ReplyCache(out / ".cache" / "replies.jsonl")
        todo = [(i, d) for i, d in enumerate(loaded.documents) if d.id not in done]
        resumed = len(loaded.documents) - len(todo)
        results: list[tuple[str, Usage]] = []  # (status, usage) of this run's documents
        errored = 0
        next_rebuild = time.monotonic() + _REBUILD_EVERY_S
        bar = self._bar(len(todo))

        async def one(
            order: int, doc: Document, gen_llm: RecordingChatModel, judge_llm: RecordingChatModel
        ) -> None:
            nonlocal errored, next_rebuild
            ledger = UsageLedger()
            llm = gen_llm.for_step("llm", ledger)
            judge = self._judge_for(judge_llm.for_step("filter", ledger))
            try:
                record = await generate_document(doc, llm, config=self.config, judge=judge, order=order)
            except LLMError as exc:
                errored += 1
                logger.warning("document %s: LLM error, will retry on the next run: %s", doc.id, exc)
                return
            except ScopeGuardError as exc:
                record = DocumentRecord(
                    doc_id=doc.id,
                    order=order,
                    text=doc.text,
                    metadata=doc.metadata,
                    status="failed",
                    error=str(exc),
                    mode=self.config.mode,
                    model=self.llm.name,
                    usage=dict(ledger.by_step),
                )
            store.save(record)
            results.append((record.status, record.total_usage))
            if bar is not None:
                bar.update(1)
            if time.monotonic() > next_rebuild:  # outputs readable during a long run
                began = time.monotonic()
                store.rebuild()  # reads every checkpoint: space rebuilds by what they cost
                spent = time.monotonic() - began
                next_rebuild = time.monotonic() + max(_REBUILD_EVERY_S, spent / _REBUILD_SHARE)

        try:
            if self.execution == "batch":
                from scopeguard.batch import BatchJobs
                from scopeguard.generation.batch import run_in_waves

                await run_in_waves(
                    todo,
                    one,
                    llm=self.llm,
                    judge_llm=self.judge_llm,
                    cache=cache,
                    jobs=BatchJobs(out, self._batch_settings()),
                )
            else:
                await self._online(todo, one, cache)
        finally:
            if bar is not None:
                bar.close()
            cache.close()
            store.rebuild()
        return self._summary(out, loaded, store, results, resumed, errored, time.perf_counter() - started)

    async def _online(self, todo: list[tuple[int, Document]], one: RunDocument, cache: ReplyCache) -> None:
        """Every document as soon as a slot frees: ``concurrency`` documents, or ``"auto"``: an AIMD
        limit on the requests in flight (documents bounded by the limiter's maximum)."""
        llm, judge_llm = self.llm, self.judge_llm
        if self.concurrency == "auto":
            watched = [
                m for m in {id(llm): llm, id(judge_llm): judge_llm}.values() if hasattr(m, "rate_limits")
            ]
            limiter = AdaptiveLimiter(rate_limits=lambda: sum(int(m.rate_limits) for m in watched))  # type: ignore[attr-defined]
            llm = LimitedChatModel(llm, limiter)
            judge_llm = llm if self.judge_llm is self.llm else LimitedChatModel(judge_llm, limiter)
            slots = limiter.maximum
        else:
            slots = self.concurrency
        gen_llm = RecordingChatModel(llm, cache)
        shared_judge = gen_llm.sharing(judge_llm)
        semaphore = asyncio.Semaphore(slots)

        async def slot(order: int, doc: Document) -> None:
            async with semaphore:
                await one(order, doc, gen_llm, shared_judge)

        await asyncio.gather(*(slot(i, d) for i, d in todo))

    def _judge_for(self, llm: RecordingChatModel) -> Detector | None:
        if self.judge is None:
            return None
        if isinstance(self.judge, Detector):
            return self.judge
        return self.judge(llm)

    def _cost(self, usage: Usage) -> float | None:
        """The estimate for ``usage``; in batch mode at the Batch API's price factor."""
        cost = estimate_cost(self.llm.name, usage)
        if cost is None or self.execution != "batch":
            return cost
        return cost * self._batch_settings().price_factor

    def _batch_settings(self) -> BatchSettings:
        from scopeguard.batch import BatchSettings

        return self.batch if self.batch is not None else BatchSettings()

    def _bar(self, total: int) -> Any:
        if not show_progress(self.progress) or total == 0:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=total, desc="generate", unit="doc")

    def _summary(
        self,
        out: Path,
        corpus: Corpus,
        store: CheckpointStore,
        results: list[tuple[str, Usage]],
        resumed: int,
        errored: int,
        seconds: float,
    ) -> RunSummary:
        usage_run = Usage.total(u for _, u in results)
        usage_total, n = Usage(), Counter[str]()
        for r in store.iter_records():  # one record in memory at a time
            usage_total += r.total_usage
            n[r.status] += 1
            n.update(q.label for q in r.questions)
            n["dropped"] += len(r.dropped)
            if r.status == "done":
                has_oos, has_ins = r.count("out_of_scope") > 0, r.count("in_scope") > 0
                n["docs_with_both"] += has_oos and has_ins
                n["docs_without_oos"] += not has_oos
                n["docs_without_in_scope"] += not has_ins
        return RunSummary(
            out_dir=str(out),
            model=self.llm.name,
            mode=self.config.mode,
            execution=self.execution,
            docs_in_corpus=len(corpus.documents) + len(corpus.skipped),
            docs_skipped=len(corpus.skipped),
            docs_done_run=sum(st == "done" for st, _ in results),
            docs_resumed=resumed,
            docs_failed=n["failed"],
            docs_errored_run=errored,
            docs_done=n["done"],
            oos_kept=n["out_of_scope"],
            oos_filtered=n["dropped"],
            in_scope=n["in_scope"],
            docs_with_both=n["docs_with_both"],
            docs_without_oos=n["docs_without_oos"],
            docs_without_in_scope=n["docs_without_in_scope"],
            docs_unusable=n["skipped"],
            usage_run=usage_run,
            usage_total=usage_total,
            cost_usd_run=self._cost(usage_run),
            cost_usd_total=self._cost(usage_total),
            seconds=seconds,
        )
