"""The generated questions of a calibration: the sampled documents written on by the project's
generator into resumable run folders (``DIR/generation/``: both kinds of question on the first
``oos_sample`` documents; ``DIR/generation-in-scope/``: in-scope questions alone on the others), and
their in-scope questions put in a reader's words (``DIR/rephrased.jsonl``)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from scopeguard.calibration._config import CalibrationConfig
from scopeguard.calibration._questions import CalibrationQuestion, QuestionSet, generated_set
from scopeguard.calibration._rephrase import REPHRASED_FILE, rephrase_in_scope
from scopeguard.errors import ConfigurationError
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.generation.config import GenerationConfig
from scopeguard.generation.pipeline import DEFAULT_WRITER
from scopeguard.llm.base import ChatModel
from scopeguard.llm.registry import from_spec
from scopeguard.runs import RunFolder
from scopeguard.types import Document

__all__ = [
    "GENERATION_DIR",
    "IN_SCOPE_GENERATION_DIR",
    "generate_sample",
    "rephrased",
    "split_sample",
]

logger = logging.getLogger(__name__)

GENERATION_DIR = "generation"
IN_SCOPE_GENERATION_DIR = "generation-in-scope"


def _generators(
    llm: str | ChatModel | None, config: GenerationConfig | None, progress: bool | None
) -> tuple[Any, Any]:
    """The project's generator (its default writer without ``llm``, the one ``scopeguard generate``
    uses), and, where it writes offline, the same writer and filter for in-scope questions alone
    (``None`` otherwise: a writer behind an API writes both kinds everywhere)."""
    from scopeguard.generation.pipeline import Generator

    both = (
        Generator(config=config, progress=progress)
        if llm is None
        else Generator(llm, config=config, progress=progress)
    )
    if both.config.mode != "offline":
        return both, None
    alone = Generator(
        both.llm,
        config=both.config.model_copy(update={"mode": "in_scope"}),
        judge=both.judge if both.judge is not None else "auto",
        progress=progress,
    )
    return both, alone


def split_sample(
    sample: tuple[Document, ...], oos_sample: int, in_scope_alone: bool
) -> list[tuple[str, tuple[Document, ...]]]:
    """The run folders the sample is generated into, each with its documents: both kinds of question
    on the first ``oos_sample`` documents, in-scope ones alone on the rest (``in_scope_alone``; all
    of them both kinds otherwise)."""
    if not in_scope_alone or len(sample) <= oos_sample:
        return [(GENERATION_DIR, sample)]
    parts = [(GENERATION_DIR, sample[:oos_sample]), (IN_SCOPE_GENERATION_DIR, sample[oos_sample:])]
    return [(name, docs) for name, docs in parts if docs]


def _nothing_generated(status: Counter[str], errored: int, n: int, root: Path) -> str:
    reason = next(
        (
            r.error
            for d in (GENERATION_DIR, IN_SCOPE_GENERATION_DIR)
            for r in CheckpointStore(root / d).iter_records()
            if r.status != "done" and r.error
        ),
        None,
    )
    return (
        f"generation wrote no questions on the {n} sampled documents ({status['done']} done, "
        f"{status['skipped']} unusable, {status['failed']} failed, {errored} with an LLM error"
        + (f"; first reason: {reason}" if reason else "")
        + f"; see {root / GENERATION_DIR}): calibrate needs questions, generated or --labelled"
    )


def generate_sample(
    sample: tuple[Document, ...],
    root: Path,
    cfg: CalibrationConfig,
    *,
    llm: str | ChatModel | None,
    generation_config: GenerationConfig | None,
    progress: bool | None,
    notes: list[str],
    described: str,
    keep_going: bool,
) -> tuple[QuestionSet, int]:
    """Questions generated on ``sample`` into ``root``'s run folders, and how many documents got
    none; what went wrong is added to ``notes``. With nothing generated, a
    :class:`ConfigurationError` unless other questions will be read (``keep_going``)."""
    from scopeguard.generation.corpus import Corpus

    gen_dir = root / GENERATION_DIR
    joined = sum(isinstance(d.metadata.get("joined"), list) for d in sample)
    both, alone = _generators(llm, generation_config, progress)
    parts = split_sample(sample, cfg.oos_sample, alone is not None)
    generated: list[CalibrationQuestion] = []
    status, errored, model = Counter[str](), 0, ""
    for name, part in parts:
        where = root / name
        generator = both if name == GENERATION_DIR else alone
        logger.info("generating questions on %d documents into %s", len(part), where)
        summary = generator.run(Corpus(documents=part, skipped=()), where)
        ids = {d.id for d in part}
        status.update(r.status for r in CheckpointStore(where).iter_records() if r.doc_id in ids)
        errored += summary.docs_errored_run
        generated += generated_set(where, doc_ids=ids).questions
        model = model or summary.model
    failed = status["failed"] + errored
    if not generated and not keep_going:
        raise ConfigurationError(_nothing_generated(status, errored, len(sample), root))
    description = (
        f"{len(generated)} questions generated by {model} {described} (seed {cfg.seed}"
        + (
            f"; both kinds on {cfg.oos_sample}, in-scope questions alone on the others"
            if len(parts) > 1
            else ""
        )
        + (f"; {joined} joined from short passages" if joined else "")
        + ")"
    )
    if failed:
        notes.append(
            f"{failed} documents got no questions in generation (see {gen_dir}; a rerun "
            "retries the ones with an LLM error)"
        )
    if status["skipped"]:
        notes.append(f"{status['skipped']} sampled documents were unusable for generation (see {gen_dir})")
    if joined:
        notes.append(f"{joined} of the {len(sample)} sampled documents were joined from short passages")
    return QuestionSet(name="generated", description=description, questions=tuple(generated)), failed


def rephrased(
    questions: QuestionSet,
    cfg: CalibrationConfig,
    llm: str | ChatModel | None,
    folder: RunFolder[Any],
    progress: bool | None,
    notes: list[str],
) -> QuestionSet:
    """``questions`` with their in-scope questions in a reader's words (``cfg.rephrase``), by the
    writer (``llm``, default the generator's)."""
    if not cfg.rephrase or not questions.count("in_scope"):
        return questions
    writer = from_spec(llm if llm is not None else DEFAULT_WRITER)
    out, kept = rephrase_in_scope(questions, writer, folder.log(REPHRASED_FILE), progress=progress)
    if kept:
        notes.append(
            f"{kept} generated in-scope questions kept their wording (no usable rephrasing; see "
            f"{REPHRASED_FILE}, a rerun asks again after an LLM error)"
        )
    return out
