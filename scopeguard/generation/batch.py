"""The generator on the OpenAI Batch API (``Generator(execution="batch")``, ``--execution batch``),
and the cache-backed chat model every batch-mode job replays through (:class:`DeferringChatModel`).

Algorithm 1 is a chain of dependent calls per document, so a batch run goes in **waves**
(:func:`scopeguard.batch.run_waves`), with the reply cache (``.cache/replies.jsonl``) as the merge
point:

1. every unfinished document runs through the normal pipeline against the cache; at its first
   request the cache cannot answer, the document stops for this wave and the request is noted
   (its cache key, with the document's own occurrence count, is the ``custom_id``);
2. the noted requests go out as one Batch API job per model (:class:`~scopeguard.batch.BatchJobs`:
   JSONL written, uploaded, submitted, the batch id recorded in ``.batch/`` before anything else,
   polled, results downloaded);
3. the results are written into the cache (marked ``"batch"``), the job is closed, and the next
   wave replays every unfinished document from its start: the cache answers what earlier waves
   fetched, so each document gets one step further; a document that finishes is checkpointed
   exactly as in the online mode.

A killed run resumes the same way: the open jobs in ``.batch/`` are collected first (never
submitted again), then the waves go on. Nothing is requested twice: a request is sent only when
the cache lacks it and no open job holds it. A request that failed in a job is sent again in the
next wave, ``request_attempts`` times in all; then its document counts as an LLM error of this run
(retried on the next). A job that ends ``failed``, ``expired`` or ``cancelled`` raises
:class:`~scopeguard.errors.BatchError` after keeping what it returned; re-running resumes.

Cost: the tokens of batch replies are booked on the document that uses them (per step, as
online) and priced by :func:`~scopeguard.generation.accounting.estimate_cost` times
``BatchSettings.price_factor`` (0.5: OpenAI's batch discount).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from scopeguard.batch import BatchJobs, BatchSettings, Wave, run_waves
from scopeguard.data import atomic_write_text
from scopeguard.generation.accounting import Usage, estimate_cost
from scopeguard.generation.cache import RecordingChatModel, ReplyCache, UsageLedger
from scopeguard.llm.base import ChatModel, Prompt
from scopeguard.types import Document

__all__ = ["BatchUsage", "DeferringChatModel", "StageUsage", "Wave", "batch_run", "run_in_waves"]

logger = logging.getLogger(__name__)

RunDocument = Callable[[int, Document, RecordingChatModel, RecordingChatModel], Awaitable[None]]


class DeferringChatModel(RecordingChatModel):
    """A :class:`RecordingChatModel` that notes a cache miss in ``wave`` instead of calling
    (:meth:`scopeguard.batch.Wave.defer`, from the ``_on_miss`` hook), sync or async.

    Make one per item (its occurrence count is the item's own, so replays find the same keys);
    :meth:`sharing` wraps the item's other models on the same count (and wave)."""

    def __init__(
        self,
        llm: ChatModel,
        cache: ReplyCache,
        ledger: UsageLedger | None = None,
        *,
        wave: Wave,
        step: str = "llm",
    ) -> None:
        super().__init__(llm, cache, ledger, step=step)
        self.wave = wave

    def _on_miss(self, key: str, prompt: Prompt, sampling: dict[str, Any]) -> NoReturn:
        self.wave.defer(key, self.llm, lambda m: m.request_body(prompt, **sampling))


USAGE_FILE = "batch_usage.json"


class StageUsage(BaseModel):
    """The tokens of one stage of a batch-mode run, and their estimated cost at the batch price."""

    model: str
    usage: Usage = Usage()
    cost_usd: float | None = None


class BatchUsage(BaseModel):
    """Token cost per stage of a batch-mode evaluation or verification run, kept in its folder
    (``batch_usage.json``) and added to as items finish, across resumed runs.

    Each finished item's replies are booked once (a reply a batch fetched counts as billed) and
    priced by :func:`~scopeguard.generation.accounting.estimate_cost` times ``price_factor``."""

    price_factor: float
    stages: dict[str, StageUsage] = {}

    @classmethod
    def load(cls, folder: str | os.PathLike[str], price_factor: float) -> BatchUsage:
        path = Path(folder) / USAGE_FILE
        if path.is_file():
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        return cls(price_factor=price_factor)

    def add(self, ledger: UsageLedger, model: str) -> None:
        for step, usage in ledger.by_step.items():
            stage = self.stages.get(step) or StageUsage(model=model)
            total = stage.usage + usage
            cost = estimate_cost(model, total)
            self.stages[step] = StageUsage(
                model=model, usage=total, cost_usd=None if cost is None else cost * self.price_factor
            )

    def save(self, folder: str | os.PathLike[str]) -> None:
        atomic_write_text(Path(folder) / USAGE_FILE, self.model_dump_json(indent=2) + "\n")


def batch_run(
    folder: str | os.PathLike[str], settings: BatchSettings | None
) -> tuple[ReplyCache, BatchJobs, BatchUsage]:
    """The reply cache, the jobs and the usage book of a batch-mode run in ``folder``."""
    jobs = BatchJobs(folder, settings)
    cache = ReplyCache(Path(folder) / ".cache" / "replies.jsonl")
    return cache, jobs, BatchUsage.load(folder, jobs.settings.price_factor)


async def run_in_waves(
    todo: list[tuple[int, Document]],
    run_document: RunDocument,
    *,
    llm: ChatModel,
    judge_llm: ChatModel,
    cache: ReplyCache,
    jobs: BatchJobs,
) -> None:
    """Run ``run_document`` on ``todo`` in waves of batch jobs (see the module docstring).

    ``run_document(order, doc, llm, judge_llm)`` gets recording models that raise the internal
    deferral on a cache miss; it must let it through (it is not an ``Exception``).
    """

    async def attempt(item: tuple[int, Document], wave: Wave) -> None:
        order, doc = item
        gen = DeferringChatModel(llm, cache, wave=wave)  # the document's own occurrence count
        await run_document(order, doc, gen, gen.sharing(judge_llm))

    await run_waves(todo, attempt, models=[llm, judge_llm], cache=cache, jobs=jobs)
