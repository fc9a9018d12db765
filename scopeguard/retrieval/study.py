"""The retrieval study of ELOQ section 4.3: does each question retrieve the document it came from?

For every retriever: index the corpus, search every question, find the rank of the question's own
document (``doc_id``), then compute Recall@k / MRR / nDCG@10 per group (all, in-scope,
out-of-scope, each topic, each topic by label) with bootstrap intervals.

Rankings of a finished retriever are checkpointed (``checkpoint_dir/rankings/<name>.jsonl``,
written atomically and tied to a fingerprint of the corpus, questions and depth), so a re-run after
a kill resumes with the retrievers not yet done. :func:`study` keeps its :class:`StudyConfig` in the
output folder (a :class:`~scopeguard.runs.RunFolder`, ``config.json``): resuming with another
dataset, corpus or depth is refused; more retrievers, other k values or bootstrap settings are not.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from scopeguard.data import Dataset, LabeledQuestion, atomic_write_jsonl, load_dataset, read_jsonl
from scopeguard.errors import DatasetError, InputError
from scopeguard.retrieval._study_result import RankedQuestion, RetrieverResult, StudyResult
from scopeguard.retrieval.base import Retriever
from scopeguard.retrieval.metrics import GroupMetrics, aggregate, recall_curve
from scopeguard.retrieval.registry import get_retriever
from scopeguard.retrieval.report import write_study_report
from scopeguard.runs import RunFolder
from scopeguard.types import Document

__all__ = [
    "RankedQuestion",
    "RetrieverResult",
    "StudyConfig",
    "StudyReport",
    "StudyResult",
    "run_study",
    "study",
]

logger = logging.getLogger(__name__)


def _fingerprint(corpus: Sequence[Document], questions: Sequence[LabeledQuestion], depth: int) -> str:
    h = hashlib.sha256(f"depth={depth}".encode())
    for d in corpus:
        h.update(f"\x1e{d.id}\x1f{d.content_hash}".encode())
    for q in questions:
        h.update(f"\x1d{q.id}\x1f{q.doc_id}\x1f{q.question}".encode())
    return h.hexdigest()


def _checkpoint_path(directory: Path, name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "retriever"
    return directory / "rankings" / f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}.jsonl"


def _load_checkpoint(path: Path, fingerprint: str) -> tuple[list[RankedQuestion], float, float] | None:
    if not path.is_file():
        return None
    try:
        rows = list(read_jsonl(path))
    except DatasetError as exc:
        logger.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return None
    if not rows or rows[0].get("fingerprint") != fingerprint:
        return None
    head = rows[0]
    return (
        [RankedQuestion(**{**r, "top_ids": tuple(r["top_ids"])}) for r in rows[1:]],
        head["index_s"],
        head["query_s"],
    )


def _topic(q: LabeledQuestion, corpus_by_id: Mapping[str, Document]) -> str:
    if isinstance(q.metadata.get("topic"), str):
        return str(q.metadata["topic"])
    doc = corpus_by_id.get(q.doc_id)
    return str(doc.metadata.get("topic", "all")) if doc is not None else "unknown"


def _rank_questions(
    retriever: Retriever,
    corpus: Sequence[Document],
    questions: Sequence[LabeledQuestion],
    depth: int,
    corpus_by_id: Mapping[str, Document],
) -> tuple[list[RankedQuestion], float, float]:
    t0 = time.perf_counter()
    retriever.index(corpus)
    t1 = time.perf_counter()
    hits = retriever.search_batch([q.question for q in questions], k=depth)
    t2 = time.perf_counter()
    rows = []
    for q, qhits in zip(questions, hits, strict=True):
        ids = tuple(h.document.id for h in qhits)
        missing = q.doc_id not in corpus_by_id
        rank = None if missing else next((h.rank for h in qhits if h.document.id == q.doc_id), None)
        rows.append(RankedQuestion(q.id, q.doc_id, q.label, _topic(q, corpus_by_id), rank, missing, ids[:10]))
    return rows, t1 - t0, t2 - t1


def _groups(
    rows: Sequence[RankedQuestion], ks: Sequence[int], n_bootstrap: int, seed: int
) -> dict[str, GroupMetrics]:
    members: dict[str, list[RankedQuestion]] = {"all": list(rows), "in_scope": [], "out_of_scope": []}
    for r in rows:
        members.setdefault(r.label, []).append(r)
        members.setdefault(f"topic:{r.topic}", []).append(r)
        members.setdefault(f"topic:{r.topic}/{r.label}", []).append(r)
    return {
        name: aggregate(
            [r.rank for r in group],
            ks,
            missing=[r.missing for r in group],
            n_bootstrap=n_bootstrap,
            seed=seed,
        )
        for name, group in members.items()
    }


def _check_ks(ks: Sequence[int], depth: int) -> tuple[int, ...]:
    """``ks`` sorted without repeats; an :class:`InputError` unless they are positive and <= depth."""
    out = tuple(sorted(set(ks)))
    if not out or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in out):
        raise InputError(f"k values must be positive integers, got {list(ks)!r}")
    if depth < max(out):
        raise InputError(f"depth ({depth}) must be at least the largest k ({max(out)})")
    return out


def run_study(
    questions: Dataset | Sequence[LabeledQuestion],
    retrievers: Sequence[str | Retriever],
    *,
    corpus: Sequence[Document] | None = None,
    ks: Sequence[int] = (1, 5, 10),
    depth: int = 100,
    n_bootstrap: int = 1000,
    seed: int = 0,
    checkpoint_dir: str | Path | None = None,
) -> StudyResult:
    """Run the retrieval study.

    Args:
        questions: a :class:`Dataset` (its documents are the corpus unless ``corpus`` is given) or
            labelled questions.
        retrievers: registry names (``bm25``, ``sbert``, ``dense:PATH`` ...) or retriever objects.
        corpus: the documents to search; a question whose ``doc_id`` is not in it counts as a miss.
        ks: the k of Recall@k. depth: how many documents each search returns (MRR is MRR@depth).
        checkpoint_dir: where finished retrievers' rankings are kept for resuming.
    """
    if isinstance(questions, Dataset):
        docs = list(corpus) if corpus is not None else list(questions.documents.values())
        qs = list(questions.questions)
    else:
        if corpus is None:
            raise InputError("pass corpus= when questions are not a Dataset")
        docs, qs = list(corpus), list(questions)
    if not qs:
        raise InputError("no questions to evaluate")
    if not docs:
        raise InputError("the corpus is empty")
    if not retrievers:
        raise InputError("no retrievers given")
    ks = _check_ks(ks, depth)
    corpus_by_id: dict[str, Document] = {}
    for d in docs:
        if not d.id:
            raise InputError("every corpus document needs an id (Document.id) to match questions' doc_id")
        if d.id in corpus_by_id:
            raise InputError(f"duplicate document id {d.id!r} in the corpus")
        corpus_by_id[d.id] = d
    missing_ids = tuple(sorted({q.doc_id for q in qs if q.doc_id not in corpus_by_id}))
    if missing_ids:
        logger.warning("%d question document(s) are not in the corpus; counted as misses", len(missing_ids))
    fingerprint = _fingerprint(docs, qs, depth)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    result = StudyResult(ks, depth, len(docs), len(qs), missing_ids)
    for spec in retrievers:
        retriever = get_retriever(spec) if isinstance(spec, str) else spec
        name = spec if isinstance(spec, str) else retriever.name
        path = _checkpoint_path(ckpt, name) if ckpt is not None else None
        loaded = _load_checkpoint(path, fingerprint) if path is not None else None
        if loaded is not None:
            logger.info("%s: rankings loaded from checkpoint %s", name, path)
            rows, index_s, query_s = loaded
        else:
            logger.info("%s: indexing %d documents, searching %d questions", name, len(docs), len(qs))
            rows, index_s, query_s = _rank_questions(retriever, docs, qs, depth, corpus_by_id)
            if path is not None:
                head = {"fingerprint": fingerprint, "retriever": name, "index_s": index_s, "query_s": query_s}
                atomic_write_jsonl(path, [head, *({**r.__dict__, "top_ids": list(r.top_ids)} for r in rows)])
        curve_k = max(ks)
        curves = {
            label: recall_curve([r.rank for r in rows if label == "all" or r.label == label], curve_k)
            for label in ("all", "in_scope", "out_of_scope")
        }
        result.retrievers[name] = RetrieverResult(
            name, tuple(rows), _groups(rows, ks, n_bootstrap, seed), curves, index_s, query_s
        )
    return result


class StudyConfig(BaseModel):
    """One retrieval study: the dataset folder, the retrievers and the metric settings.

    A resumed study must have the same ``dataset``, ``corpus`` and ``depth`` (a
    :class:`~scopeguard.errors.ConfigurationError` names the fields that differ); ``retrievers``
    (the saved list grows), ``ks``, ``n_bootstrap`` and ``seed`` may change, since they only add
    rankings or change the metrics. It
    reuses the rankings of each retriever whose checkpoint matches the corpus, questions and depth
    (a fingerprint, which also catches files edited in place).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str
    retrievers: tuple[str, ...] = ("bm25", "sbert")
    corpus: str | None = None
    """A documents.jsonl (or a folder holding one) searched instead of the dataset's documents."""
    ks: tuple[int, ...] = (1, 5, 10)
    depth: int = 100
    n_bootstrap: int = 1000
    seed: int = 0


_FREE = ("retrievers", "ks", "n_bootstrap", "seed")
"""StudyConfig fields a resumed study may change: more retrievers, other metric settings."""


def _merge_retrievers(saved: StudyConfig, config: StudyConfig) -> StudyConfig:
    """The saved configuration lists every retriever whose rankings the folder holds."""
    return config.model_copy(
        update={"retrievers": tuple(dict.fromkeys(saved.retrievers + config.retrievers))}
    )


@dataclass(frozen=True)
class StudyReport:
    """A finished study and the report files written for it."""

    result: StudyResult
    files: dict[str, Path]


def _read_corpus(path: Path) -> list[Document]:
    file = path / "documents.jsonl" if path.is_dir() else path
    docs = []
    for i, row in enumerate(read_jsonl(file), 1):
        if not isinstance(row.get("doc_id"), str) or not isinstance(row.get("text"), str):
            raise InputError(f"{file}:{i}: each corpus line needs string 'doc_id' and 'text'")
        meta = {key: v for key, v in row.items() if key not in ("doc_id", "text")}
        docs.append(Document(id=row["doc_id"], text=row["text"], metadata=meta))
    return docs


def study(config: StudyConfig, out: str | Path, *, plot: bool = True) -> StudyReport:
    """Run (or resume) ``config`` with its checkpoints and report in the folder ``out``.

    The folder keeps the configuration (``config.json``); resuming it with another dataset, corpus
    or depth raises a :class:`~scopeguard.errors.ConfigurationError` (see :class:`StudyConfig`).
    """
    if not config.retrievers:
        raise InputError("--retrievers is empty")
    _check_ks(config.ks, config.depth)
    dataset = load_dataset(config.dataset)
    corpus = _read_corpus(Path(config.corpus)) if config.corpus is not None else None
    RunFolder(out, StudyConfig, free=_FREE).open(config, merge=_merge_retrievers)
    result = run_study(
        dataset,
        config.retrievers,
        corpus=corpus,
        ks=config.ks,
        depth=config.depth,
        n_bootstrap=config.n_bootstrap,
        seed=config.seed,
        checkpoint_dir=out,
    )
    return StudyReport(result=result, files=write_study_report(result, out, plot=plot))
