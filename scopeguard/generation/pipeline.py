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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from scopeguard._progress import show_progress
from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError, LLMError, ScopeGuardError
from scopeguard.generation._document import generate_document
from scopeguard.generation.accounting import Usage, estimate_cost
from scopeguard.generation.cache import RecordingChatModel, ReplyCache, UsageLedger
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord
from scopeguard.generation.config import OFFLINE_MODES, GenerationConfig, upgrade_settings
from scopeguard.generation.corpus import Corpus, CorpusOptions, LengthRule, load_generation_corpus
from scopeguard.generation.offline import Screen, get_screens
from scopeguard.generation.summary import RunSummary, summarize
from scopeguard.llm.base import ChatModel
from scopeguard.llm.concurrency import AdaptiveLimiter, LimitedChatModel
from scopeguard.llm.registry import from_spec
from scopeguard.runs import RunFolder
from scopeguard.types import Document

if TYPE_CHECKING:  # the Batch API layer (and the openai SDK it needs) loads only for batch runs
    from typing_extensions import Unpack

    from scopeguard.batch import BatchSettings
    from scopeguard.generation.batch import RunDocument

__all__ = ["DEFAULT_WRITER", "GenerationRunConfig", "Generator", "run_folder"]

#: the LLM that writes questions when none is named (``Generator()``, ``scopeguard generate`` and
#: ``scopeguard calibrate`` without ``--llm``): the packaged model that writes best here (it keeps
#: more out-of-scope questions a document than the 0.5B and leaves fewer documents short:
#: docs/research/generation-log.md, "Offline generation with the packaged models"). ``"local"``
#: alone still names the 0.5B, the fastest.
DEFAULT_WRITER = "local:qwen2.5-coder-1.5b"

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


def run_folder(out: str | os.PathLike[str]) -> RunFolder[GenerationRunConfig]:
    """The run folder ``out`` of a generation run (``run.json``; one saved before the ``screens``
    tuple is read as :func:`~scopeguard.generation.config.upgrade_settings` says)."""
    return RunFolder(out, GenerationRunConfig, config_file="run.json", upgrade=upgrade_settings)


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
            followup="judge" in config.fallbacks,
            max_tokens=config.judge_max_tokens,
        )

    return factory


class Generator:
    """ELOQ's guided-hallucination generator.

    ``llm`` writes the questions (a spec such as ``"openai:gpt-4o-mini"`` or ``"local"``, or a
    :class:`ChatModel`; default :data:`DEFAULT_WRITER`, the packaged 1.5B). ``judge`` filters out
    answerable questions (Algorithm 1 step 10). ``"auto"`` (the default) is the LLM judge, except in
    an offline mode, where the ``logprob`` reader filters, and when the judge LLM is one of the small
    packaged GGUF models, whose out-of-scope judgement is near chance on the ELOQ dev split (accuracy
    0.30-0.51, see ``benchmarks/judge_voting.py``): then the offline ``fast`` detector (0.90) does.
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
        llm: str | ChatModel = DEFAULT_WRITER,
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
        # the screens, looked up once: an unknown name raises here, naming the valid ones
        self.screens: tuple[Screen, ...] = get_screens(self.config.screens)
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
        **options: Unpack[CorpusOptions],
    ) -> RunSummary:
        """:meth:`run`, awaited: for a caller already in an event loop."""
        started = time.perf_counter()
        out = Path(out_dir)
        loaded = corpus if isinstance(corpus, Corpus) else load_generation_corpus(corpus, **options)
        run_folder(out).open(self.run_config())
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
            judge = self.judge_for(judge_llm.for_step("filter", ledger))
            try:
                record = await generate_document(
                    doc, llm, config=self.config, judge=judge, order=order, screens=self.screens
                )
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

    def judge_for(self, llm: RecordingChatModel) -> Detector | None:
        """The filter's judge as this generator reads with it (``None`` without a filter), built on
        ``llm`` where the judge is made per LLM."""
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
        return summarize(
            store,
            out=out,
            model=self.llm.name,
            mode=self.config.mode,
            execution=self.execution,
            corpus=corpus,
            results=results,
            resumed=resumed,
            errored=errored,
            seconds=seconds,
            cost=self._cost,
        )
