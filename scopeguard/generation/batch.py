"""The generator on the OpenAI Batch API (``Generator(execution="batch")``, ``--execution batch``).

Algorithm 1 is a chain of dependent calls per document, so a batch run goes in **waves**, with
the reply cache (``.cache/replies.jsonl``) as the merge point:

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

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from scopeguard.batch import BatchJobs, BatchJobState
from scopeguard.errors import ConfigurationError, LLMError
from scopeguard.generation.cache import CachedReply, RecordingChatModel, ReplyCache, UsageLedger
from scopeguard.llm.base import ChatModel, Prompt
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.types import Document

__all__ = ["DeferringChatModel", "Wave", "run_in_waves"]

logger = logging.getLogger(__name__)

RunDocument = Callable[[int, Document, RecordingChatModel, RecordingChatModel], Awaitable[None]]


class _Deferred(BaseException):
    """A request the cache cannot answer yet: ends the document's pass for this wave.

    A BaseException (like ``asyncio.CancelledError``) so that no step's error handling takes it
    for a failure."""


class Wave:
    """The requests one pass over the documents could not answer from the cache."""

    def __init__(self, failures: dict[str, tuple[int, str]], attempts: int) -> None:
        self.requests: dict[str, tuple[OpenAIChatModel, dict[str, Any]]] = {}
        self.failures = failures  # cache key -> (failed attempts, last error) in this run
        self.attempts = attempts

    def defer(self, key: str, llm: ChatModel, body: Callable[[OpenAIChatModel], dict[str, Any]]) -> NoReturn:
        failed, error = self.failures.get(key, (0, ""))
        if failed >= self.attempts:
            raise LLMError(f"a batch request failed {failed} times (last: {error})")
        if not isinstance(llm, OpenAIChatModel):
            raise ConfigurationError(
                f"--execution batch needs OpenAI-compatible models (openai:MODEL), not {llm.name!r}"
            )
        self.requests.setdefault(key, (llm, body(llm)))
        raise _Deferred

    def jobs(self) -> list[tuple[OpenAIChatModel, dict[str, dict[str, Any]]]]:
        """The requests grouped into one job per model and endpoint."""
        groups: dict[tuple[str, str], tuple[OpenAIChatModel, dict[str, dict[str, Any]]]] = {}
        for key, (llm, body) in self.requests.items():
            groups.setdefault((llm.base_url, llm.model), (llm, {}))[1][key] = body
        return list(groups.values())


class DeferringChatModel(RecordingChatModel):
    """A :class:`RecordingChatModel` that notes a cache miss in ``wave`` instead of calling."""

    def __init__(
        self,
        llm: ChatModel,
        cache: ReplyCache,
        ledger: UsageLedger | None = None,
        *,
        wave: Wave,
        step: str = "llm",
        _occurrences: Counter[str] | None = None,
    ) -> None:
        super().__init__(llm, cache, ledger, step=step, _occurrences=_occurrences)
        self.wave = wave

    def for_step(self, step: str, ledger: UsageLedger | None = None) -> DeferringChatModel:
        return DeferringChatModel(
            self.llm,
            self.cache,
            ledger if ledger is not None else self.ledger,
            wave=self.wave,
            step=step,
            _occurrences=self._occurrences,
        )

    def sharing(self, llm: ChatModel, *, step: str = "llm") -> DeferringChatModel:
        return DeferringChatModel(
            llm, self.cache, UsageLedger(), wave=self.wave, step=step, _occurrences=self._occurrences
        )

    async def acall(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> CachedReply:
        key = self._key(prompt, n, temperature, max_tokens, seed)
        hit = self.cache.get(key)
        if hit is None:
            self.wave.defer(
                key,
                self.llm,
                lambda m: m.request_body(
                    prompt, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed
                ),
            )
        return self._book(key, None, hit)


def _model_for(state: BatchJobState, models: list[ChatModel]) -> OpenAIChatModel:
    for m in models:
        if isinstance(m, OpenAIChatModel) and (m.base_url, m.model) == (state.endpoint, state.model):
            return m
    raise ConfigurationError(
        f"the open batch job {state.name} ({state.batch_id}) was sent to {state.model} at "
        f"{state.endpoint}; run with that model and endpoint to collect it"
    )


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
    failures: dict[str, tuple[int, str]] = {}

    async def collect(model: OpenAIChatModel, state: BatchJobState) -> None:
        outcome = await asyncio.to_thread(jobs.run, model, state)
        for key, completion in outcome.replies.items():
            if cache.get(key) is None:  # a merge cut short by a kill stored some already
                cache.put(
                    key,
                    {
                        "id": "r-" + key[:12],
                        "model": completion.model or model.model,
                        "texts": list(completion.texts),
                        "finish_reasons": list(completion.finish_reasons),
                        "prompt_tokens": completion.prompt_tokens,
                        "completion_tokens": completion.completion_tokens,
                        "batch": outcome.state.batch_id,
                    },
                )
        for key, error in outcome.errors.items():
            failures[key] = (failures.get(key, (0, ""))[0] + 1, error)
        jobs.close(outcome.state)
        if not outcome.succeeded:
            raise jobs.failure(outcome.state)

    for state in jobs.open_jobs():
        logger.info("collecting batch job %s left by an earlier run", state.name)
        await collect(_model_for(state, [llm, judge_llm]), state)

    pending, wave_no = list(todo), 0
    while pending:
        wave_no += 1
        wave = Wave(failures, jobs.settings.request_attempts)
        still: list[tuple[int, Document]] = []
        for order, doc in pending:
            gen = DeferringChatModel(llm, cache, wave=wave)  # the document's own occurrence count
            try:
                await run_document(order, doc, gen, gen.sharing(judge_llm))
            except _Deferred:
                still.append((order, doc))
        pending = still
        if not wave.requests:
            break
        logger.info("wave %d: %d requests for %d documents", wave_no, len(wave.requests), len(pending))
        for model, bodies in wave.jobs():
            await collect(model, jobs.write(model, bodies))
