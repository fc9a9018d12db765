"""Document-parallel ELOQ generation on Ray: one generator per shard of documents, shards merged.

Each Ray task runs :class:`~scopeguard.generation.Generator` on its shard into its own run folder
``OUT/shards/shard-NNN`` (own ``run.json``, checkpoints and reply cache), so shards never share a
file. The driver then copies every finished checkpoint into ``OUT/.checkpoints`` (the document's
position in the whole corpus restored) and rebuilds ``OUT/questions.jsonl`` and
``OUT/documents.jsonl``. A re-run first merges what the shards already finished, then shards only
what is left, so it resumes after a kill whatever the number of shards.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from scopeguard.errors import ConfigurationError
from scopeguard.generation.accounting import Usage
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.generation.config import GenerationConfig
from scopeguard.generation.corpus import Corpus, LengthRule, load_generation_corpus
from scopeguard.generation.pipeline import Generator, run_folder
from scopeguard.generation.summary import RunSummary
from scopeguard.llm.base import ChatModel
from scopeguard.scale._ray import ray_session
from scopeguard.types import Document

__all__ = ["ShardedRunSummary", "generate_sharded"]

logger = logging.getLogger(__name__)

LLMSource = str | Callable[[], ChatModel]
SHARDS_DIR = "shards"


class ShardedRunSummary(BaseModel):
    """What a sharded run did: each shard's own summary and the merged folder's totals."""

    model_config = ConfigDict(frozen=True)

    out_dir: str
    docs_in_corpus: int
    docs_done_run: int
    docs_errored_run: int
    docs_merged: int
    questions: int
    usage_run: Usage
    seconds: float
    shards: tuple[RunSummary, ...] = ()


def _make(source: LLMSource) -> str | ChatModel:
    return source() if callable(source) else source


def _run_shard(
    llm: LLMSource,
    judge_llm: LLMSource | None,
    judge: str | None,
    config: GenerationConfig,
    concurrency: int,
    documents: list[Document],
    out_dir: str,
) -> RunSummary:
    judge_model = _make(judge_llm) if judge_llm is not None else None
    gen = Generator(
        _make(llm), config=config, judge=judge, judge_llm=judge_model, concurrency=concurrency, progress=False
    )
    return gen.run(Corpus(documents=tuple(documents), skipped=()), out_dir)


def _merge(out: Path, position: dict[str, int]) -> int:
    """Copy finished shard checkpoints into ``out`` with their corpus position; returns how many."""
    store = CheckpointStore(out)
    copied = 0
    for shard in sorted((out / SHARDS_DIR).glob("shard-*")):
        for record in CheckpointStore(shard).iter_records():
            if record.doc_id not in position or store.path_for(record.doc_id).is_file():
                continue
            store.save(record.model_copy(update={"order": position[record.doc_id]}))
            copied += 1
    return copied


def generate_sharded(
    llm: LLMSource,
    corpus: str | os.PathLike[str] | Iterable[Any] | Corpus,
    out_dir: str | os.PathLike[str],
    *,
    shards: int = 2,
    config: GenerationConfig | None = None,
    judge: str | None = "auto",
    judge_llm: LLMSource | None = None,
    concurrency: int = 4,
    address: str | None = None,
    num_cpus_per_shard: float = 1,
    length_rule: LengthRule | None = None,
    max_docs: int | None = None,
) -> ShardedRunSummary:
    """Generate questions for ``corpus`` into ``out_dir`` with ``shards`` Ray tasks in parallel.

    ``llm`` / ``judge_llm`` are specs (``"openai:gpt-4o-mini"``) or zero-argument callables that make
    the :class:`ChatModel` on the worker (a model object itself does not travel between processes);
    ``judge`` names the filter as in :class:`Generator`. Each task runs ``concurrency`` documents at
    a time. ``address`` as in :func:`scopeguard.scale.ray_session`.
    """
    if shards < 1:
        raise ConfigurationError(f"shards must be at least 1, got {shards}")
    started = time.perf_counter()
    config = config or GenerationConfig()
    out = Path(out_dir)
    loaded = (
        corpus
        if isinstance(corpus, Corpus)
        else load_generation_corpus(corpus, length_rule=length_rule, max_docs=max_docs)
    )
    driver = Generator(
        _make(llm),
        config=config,
        judge=judge,
        judge_llm=_make(judge_llm) if judge_llm is not None else None,
        progress=False,
    )
    run_folder(out).open(driver.run_config())
    position = {d.id: i for i, d in enumerate(loaded.documents)}
    _merge(out, position)  # what an earlier, killed run finished
    store = CheckpointStore(out)
    todo = [d for d in loaded.documents if not store.path_for(d.id).is_file()]
    results: list[RunSummary] = []
    if todo:
        ray = ray_session(address)
        task = ray.remote(num_cpus=num_cpus_per_shard)(_run_shard)
        n = min(shards, len(todo))
        parts = [todo[k * len(todo) // n : (k + 1) * len(todo) // n] for k in range(n)]
        logger.info(
            "generating %d documents in %d shards (%d already done)", len(todo), n, len(position) - len(todo)
        )
        refs = [
            task.remote(
                llm, judge_llm, judge, config, concurrency, part, str(out / SHARDS_DIR / f"shard-{k:03d}")
            )
            for k, part in enumerate(parts)
        ]
        results = list(ray.get(refs))
        _merge(out, position)
    merged, questions = store.rebuild()
    return ShardedRunSummary(
        out_dir=str(out),
        docs_in_corpus=len(loaded.documents) + len(loaded.skipped),
        docs_done_run=sum(r.docs_done_run for r in results),
        docs_errored_run=sum(r.docs_errored_run for r in results),
        docs_merged=merged,
        questions=questions,
        usage_run=Usage.total(r.usage_run for r in results),
        seconds=time.perf_counter() - started,
        shards=tuple(results),
    )
