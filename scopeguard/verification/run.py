"""Resumable verification runs: questions and a corpus from a dataset folder or MS MARCO TSV files.

A run folder holds ``config.json`` (what was run), ``results.jsonl`` (one
:class:`VerificationResult` per question, appended and fsynced as each finishes) and, at the end,
``report.json`` / ``report.md``. Re-running into the same folder skips the ids already done (a
half-written last line from a kill is dropped); a different configuration is refused.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from scopeguard.data import load_dataset
from scopeguard.errors import ConfigurationError, InputError, LLMConnectionError, LLMError
from scopeguard.retrieval.base import Retriever
from scopeguard.types import Document
from scopeguard.verification.loop import AnswerVerifier, VerificationResult
from scopeguard.verification.msmarco import (
    Query,
    iter_collection,
    iter_queries,
    read_qrels,
    sample_collection,
)
from scopeguard.verification.passages import dataset_passages
from scopeguard.verification.report import RESULTS_FILE

__all__ = ["completed_ids", "load_corpus", "load_questions", "prepare_run", "run_verification"]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"


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


def load_corpus(
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


def completed_ids(results_path: str | os.PathLike[str]) -> set[str]:
    """Ids already in a results file; a torn last line (killed mid-write) is cut off."""
    p = Path(results_path)
    if not p.is_file():
        return set()
    data = p.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        logger.warning("%s: dropping a half-written last line", p)
        with p.open("r+b") as fh:
            fh.truncate(cut)
        data = data[:cut]
    done: set[str] = set()
    for lineno, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if line.strip():
            try:
                done.add(str(json.loads(line)["id"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise InputError(f"{p}:{lineno}: not a verification result row") from None
    return done


def prepare_run(out_dir: str | os.PathLike[str], config: dict[str, Any]) -> set[str]:
    """Create or reopen a run folder: refuse another configuration, return the ids already done."""
    out = Path(out_dir)
    _check_config(out, config)
    return completed_ids(out / RESULTS_FILE)


def _check_config(out: Path, config: dict[str, Any]) -> None:
    path = out / CONFIG_FILE
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        diff = {k: (old.get(k), v) for k, v in config.items() if k != "limit" and old.get(k) != v}
        if diff:
            changes = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in diff.items())
            raise ConfigurationError(
                f"{out} holds a run with another configuration ({changes}); use a new --out folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def run_verification(
    verifier: AnswerVerifier,
    questions: Sequence[Query],
    corpus: Sequence[Document] | Retriever,
    out_dir: str | os.PathLike[str],
    *,
    config: dict[str, Any] | None = None,
    answers: dict[str, str] | None = None,
    progress: bool | None = None,
) -> list[VerificationResult]:
    """Verify ``questions`` against ``corpus`` into ``out_dir``, resuming a killed run.

    ``answers`` (id -> answer) reuses generated answers, for example from another run, so two
    runs differ only in retrieval or reading. An unreachable LLM aborts the run (re-run to resume);
    another LLM failure is recorded for that question as verdict ``unknown`` with the error.
    Returns the results written by this call.
    """
    done = prepare_run(out_dir, config or {})
    results_path = Path(out_dir) / RESULTS_FILE
    todo = [q for q in questions if q.id not in done]
    logger.info("%d question(s) to verify, %d already done", len(todo), len(questions) - len(todo))
    if not todo:
        return []
    # a document list is indexed once for the whole run
    retriever = corpus if isinstance(corpus, Retriever) else verifier.retriever_for(list(corpus), split=False)
    written: list[VerificationResult] = []
    show = sys.stderr.isatty() if progress is None else progress
    with results_path.open("a", encoding="utf-8") as fh:
        for q in tqdm(todo, desc="verify", unit="q", disable=not show):
            try:
                result = verifier.verify(q.text, (answers or {}).get(q.id), retriever, id=q.id)
            except LLMConnectionError:
                raise
            except LLMError as exc:
                logger.warning("question %s: %s", q.id, exc)
                result = VerificationResult(
                    id=q.id, question=q.text, answer="", verdict="unknown", error=str(exc)
                )
            fh.write(result.model_dump_json() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            written.append(result)
    return written
