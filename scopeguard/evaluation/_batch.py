"""The evaluation's responses on the OpenAI Batch API (``run_evaluation(execution="batch")``).

Each (question, answerer) pair replays :func:`~scopeguard.evaluation.runner.run_evaluation`'s
own step against the run folder's reply cache through
:class:`~scopeguard.generation.batch.DeferringChatModel` (the RAG answer, then the judge votes),
in waves of Batch API jobs (:func:`scopeguard.batch.run_waves`); a finished pair's record is
appended as online, and its tokens per stage are booked in ``batch_usage.json``.
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Callable, Sequence
from typing import Any, cast

from scopeguard.batch import BatchSettings, Wave, run_waves
from scopeguard.data import LabeledQuestion
from scopeguard.errors import ConfigurationError
from scopeguard.evaluation.answering import Answerer, PromptAnswerer
from scopeguard.evaluation.defusion import DefusionJudge
from scopeguard.evaluation.refusal import RefusalJudge
from scopeguard.evaluation.store import ResponseRecord, RunStore
from scopeguard.generation.batch import DeferringChatModel, batch_run

__all__ = ["check_batchable", "respond_in_batches"]

Respond = Callable[[Answerer, LabeledQuestion, DefusionJudge, RefusalJudge | None], ResponseRecord]
"""One evaluation step: the answerer's response to the question and its judgement."""


def check_batchable(
    answerers: Sequence[Answerer], defusion_judge: DefusionJudge, refusal_judge: RefusalJudge | None
) -> None:
    """Refuse what a batch run cannot replay: a user's pipeline, or a model without the Batch API."""
    models = [defusion_judge.llm, *(j.llm for j in [refusal_judge] if j is not None)]
    for a in answerers:
        if not isinstance(a, PromptAnswerer):
            raise ConfigurationError(
                f"--execution batch cannot replay the pipeline {a.name!r}: evaluate an openai: RAG LLM "
                "with the RAG prompts instead"
            )
        models.append(a.llm)
    from scopeguard.llm.openai_compat import OpenAIChatModel

    online = sorted({m.name for m in models if not isinstance(m, OpenAIChatModel)})
    if online:
        raise ConfigurationError(
            f"--execution batch needs OpenAI-compatible models (openai:MODEL), not {', '.join(online)}"
        )


def respond_in_batches(
    todo: list[tuple[LabeledQuestion, Answerer]],
    respond: Respond,
    store: RunStore,
    defusion_judge: DefusionJudge,
    refusal_judge: RefusalJudge | None,
    *,
    out: str | os.PathLike[str],
    settings: BatchSettings | None,
    bar: Any,
) -> int:
    """Run the (question, answerer) pairs in waves of Batch API jobs; returns how many failed."""
    cache, jobs, usage = batch_run(out, settings)
    failed = 0

    async def attempt(item: tuple[LabeledQuestion, Answerer], wave: Wave) -> None:
        nonlocal failed
        q, answerer = item[0], cast(PromptAnswerer, item[1])
        rag = DeferringChatModel(answerer.llm, cache, wave=wave, step="answer")  # the pair's own count
        replayed, defusion = copy.copy(answerer), copy.copy(defusion_judge)
        replayed.llm = rag
        defusion.llm = rag.sharing(defusion_judge.llm, step="judge")
        judges: list[DefusionJudge | RefusalJudge] = [defusion]
        refusal = copy.copy(refusal_judge)
        if refusal is not None:
            refusal.llm = rag.sharing(refusal.llm, step="judge")
            judges.append(refusal)
        rec = respond(replayed, q, defusion, refusal)
        store.append_response(rec)
        for model in (rag, *(j.llm for j in judges)):
            recorded = cast(DeferringChatModel, model)
            usage.add(recorded.ledger, recorded.llm.name)
        usage.save(out)
        failed += rec.error is not None
        bar.update()

    models = [defusion_judge.llm, *(j.llm for j in [refusal_judge] if j is not None)]
    models += [cast(PromptAnswerer, a).llm for _, a in todo]
    try:
        asyncio.run(run_waves(todo, attempt, models=models, cache=cache, jobs=jobs))
    finally:
        cache.close()
    return failed
