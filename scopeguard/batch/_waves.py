"""Waves of Batch API jobs over a reply cache: record the misses, submit them, replay.

Every job whose items are short chains of dependent LLM calls (generation: claims -> ... ->
questions; evaluation: RAG answer -> judge votes; verification: answer -> reader -> verdict) runs
the same way in batch mode:

1. every unfinished item runs its normal code against a cache-backed chat model; at its first
   request the cache cannot answer, the model calls :meth:`Wave.defer`, which notes the request
   (its cache key is the ``custom_id``) and raises :class:`Deferred`: the item stops for this wave;
2. the noted requests go out as one job per model (:class:`~scopeguard.batch.BatchJobs`);
3. the results are written into the cache (marked with the batch id), the job is closed (its
   files deleted from the server), and the next wave replays the unfinished items from their
   start: each gets one step further.

A resumed run first collects the jobs an earlier run left open (never submitting them again) and
deletes the files of closed jobs whose clean-up a kill interrupted. A request that failed in a
job is sent again in the next wave, ``request_attempts`` times in all; then :meth:`Wave.defer`
raises :class:`~scopeguard.errors.LLMError`, which the item handles as any LLM failure.

The cache-backed chat model lives with the reply cache
(:class:`scopeguard.generation.batch.DeferringChatModel`); this module only needs a store with
``get(key)`` and ``put(key, entry)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from scopeguard.batch._jobs import BatchJobs, BatchJobState
from scopeguard.errors import ConfigurationError, LLMError
from scopeguard.llm.base import ChatModel

if TYPE_CHECKING:  # the openai SDK loads only when a batch run starts
    from scopeguard.llm.openai_compat import OpenAIChatModel

__all__ = ["Deferred", "ReplyStore", "Wave", "run_waves"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Deferred(BaseException):
    """A request the cache cannot answer yet: ends the item's pass for this wave.

    A BaseException (like ``asyncio.CancelledError``) so that no step's error handling takes it
    for a failure."""


class ReplyStore(Protocol):
    """Where batch results are merged (:class:`scopeguard.generation.cache.ReplyCache`)."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, entry: dict[str, Any]) -> None: ...


class Wave:
    """The requests one pass over the items could not answer from the cache."""

    def __init__(self, failures: dict[str, tuple[int, str]], attempts: int) -> None:
        self.requests: dict[str, tuple[OpenAIChatModel, dict[str, Any]]] = {}
        self.failures = failures  # cache key -> (failed attempts, last error) in this run
        self.attempts = attempts

    def defer(self, key: str, llm: ChatModel, body: Callable[[OpenAIChatModel], dict[str, Any]]) -> NoReturn:
        from scopeguard.llm.openai_compat import OpenAIChatModel

        failed, error = self.failures.get(key, (0, ""))
        if failed >= self.attempts:
            raise LLMError(f"a batch request failed {failed} times (last: {error})")
        if not isinstance(llm, OpenAIChatModel):
            raise ConfigurationError(
                f"--execution batch needs OpenAI-compatible models (openai:MODEL), not {llm.name!r}"
            )
        self.requests.setdefault(key, (llm, body(llm)))
        raise Deferred

    def jobs(self) -> list[tuple[OpenAIChatModel, dict[str, dict[str, Any]]]]:
        """The requests grouped into one job per model and endpoint."""
        groups: dict[tuple[str, str], tuple[OpenAIChatModel, dict[str, dict[str, Any]]]] = {}
        for key, (llm, body) in self.requests.items():
            groups.setdefault((llm.base_url, llm.model), (llm, {}))[1][key] = body
        return list(groups.values())


def _model_for(state: BatchJobState, models: Sequence[ChatModel]) -> OpenAIChatModel:
    from scopeguard.llm.openai_compat import OpenAIChatModel

    for m in models:
        if isinstance(m, OpenAIChatModel) and (m.base_url, m.model) == (state.endpoint, state.model):
            return m
    raise ConfigurationError(
        f"the open batch job {state.name} ({state.batch_id}) was sent to {state.model} at "
        f"{state.endpoint}; run with that model and endpoint to collect it"
    )


async def run_waves(
    items: Sequence[T],
    attempt: Callable[[T, Wave], Awaitable[None]],
    *,
    models: Sequence[ChatModel],
    cache: ReplyStore,
    jobs: BatchJobs,
) -> None:
    """Run ``attempt(item, wave)`` on ``items`` in waves of batch jobs (see the module docstring).

    ``attempt`` replays the item against cache-backed models that call ``wave.defer`` on a miss;
    it must let :class:`Deferred` through (it is not an ``Exception``) and store the item's result
    itself when it finishes. ``models`` are the OpenAI-compatible models the jobs may have gone to.
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
        await asyncio.to_thread(jobs.close, model, outcome.state)
        if not outcome.succeeded:
            raise jobs.failure(outcome.state)

    for state in jobs.unclean_jobs():
        await asyncio.to_thread(jobs.delete_files, _model_for(state, models), state)
    for state in jobs.open_jobs():
        logger.info("collecting batch job %s left by an earlier run", state.name)
        await collect(_model_for(state, models), state)

    pending, wave_no = list(items), 0
    while pending:
        wave_no += 1
        wave = Wave(failures, jobs.settings.request_attempts)
        still: list[T] = []
        for item in pending:
            try:
                await attempt(item, wave)
            except Deferred:
                still.append(item)
        pending = still
        if not wave.requests:
            break
        logger.info("wave %d: %d requests for %d items", wave_no, len(wave.requests), len(pending))
        for model, bodies in wave.jobs():
            await collect(model, jobs.write(model, bodies))
