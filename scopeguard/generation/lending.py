"""Out-of-scope test questions lent from a query log: people's own questions, asked of the
documents next to the one that answers them.

For each question of the log (:func:`scopeguard.querylog.read_query_log`) the retriever ranks the
corpus. The question's own document is the first of its logged ``doc_ids`` that the corpus holds,
or the top-ranked document when the log names none; its neighbours are the ``neighbours``
documents ranked right below its own (a neighbour with its own document's text is passed over).
A neighbour on another subject makes no test: nobody would ask it that question, and any detector
catches it. So a pair is read only when the neighbour and the question's own document are at least
``min_similarity`` alike (cosine of their ``similarity_model`` embeddings, MiniLM by default;
0 reads every pair). Pages of one organisation, paragraphs of one article or reviews of one kind of
thing are alike; pages of unrelated organisations are not. The default, 0.4, was chosen on
questions lent and read by hand (``benchmarks/lent_questions.py``): SQuAD 2.0 questions lent
between Wikipedia paragraphs were natural and unanswerable 28 of 29 times above it and 8 of 24
below it, and 2 of 51 questions lent between unrelated policy pages reached it.
The question is asked of each neighbour by the generator's filter: the judge a
:class:`~scopeguard.generation.Generator` builds (the ``logprob`` reader with the packaged model),
read as the generator's keeper reads it
(:meth:`~scopeguard.generation._context.DocumentContext.filter_question`), and kept when it finds
the question out of scope with P(out of scope) at least the keeper's floor
(:func:`~scopeguard.generation.offline.margin_floor`: the threshold plus ``oos_margin``).
A question the log labels ``out_of_scope`` is not lent (it is out of scope already); ``in_scope``,
``unsure`` and unlabelled ones are. The same question (case and spacing aside) is asked of one
document once.

The output folder is a dataset in the canonical format::

    OUT/documents.jsonl       the neighbours that received a lent question (as in the corpus)
    OUT/questions.jsonl       the lent questions: label out_of_scope, with lent_from (the log id),
                              source_doc (its own document), rank (the neighbour's place in the
                              retriever's ranking, 1 = first) and score (the filter's P(out of scope))
    OUT/lending.json          the settings; a resume with other settings is refused
    OUT/.lending/reads.jsonl  one line per (question, neighbour) read, kept or not
    OUT/.cache/replies.jsonl  an LLM judge's replies (none with the logprob reader)

A rerun skips the pairs read before and rebuilds both files from the reads, so nothing is
duplicated (a rerun with another ``min_similarity`` reads only the pairs it adds); a read that
failed (an LLM error) is not recorded and is asked again on the next run. The log may grow
between runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from scopeguard._optional import require
from scopeguard._progress import progress_meter
from scopeguard.data import DOCUMENTS_FILE, QUESTIONS_FILE, jsonl_writer
from scopeguard.detection.detectors.base import Detector
from scopeguard.detection.profile import detector_identity
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.generation._context import DocumentContext
from scopeguard.generation._lending_records import (
    LendingConfig,
    LendingSummary,
    LentRead,
    Pair,
    _RunConfig,
)
from scopeguard.generation.cache import RecordingChatModel, ReplyCache, UsageLedger
from scopeguard.generation.checkpoint import FilterRecord
from scopeguard.generation.corpus import corpus_passages
from scopeguard.generation.offline import margin_floor
from scopeguard.generation.pipeline import Generator
from scopeguard.querylog import LoggedQuestion, read_query_log
from scopeguard.retrieval.base import Retriever, retrieve
from scopeguard.retrieval.registry import get_retriever
from scopeguard.runs import JsonlLog, RunFolder
from scopeguard.types import Document

__all__ = [
    "Lender",
    "LendingConfig",
    "LendingSummary",
    "LentRead",
    "Pair",
    "Similarity",
    "alike_pairs",
    "plan_pairs",
]

#: how alike two texts are, pair by pair (cosines): ``f(firsts, seconds)``
Similarity = Callable[[Sequence[str], Sequence[str]], Sequence[float]]

logger = logging.getLogger(__name__)

CONFIG_FILE = "lending.json"
READS_FILE = ".lending/reads.jsonl"
#: how far down the ranking a question's own document is looked for (beyond its neighbours)
SEARCH_DEPTH = 50
_NOT_IN_CORPUS = "its doc_ids name no document of the corpus"
_NO_FILTER = "lending needs the generator's filter: it is off (--no-filter)"


def _norm(question: str) -> str:
    return " ".join(question.casefold().split())


def _own(q: LoggedQuestion, ranked: Sequence[str], index: dict[str, Document]) -> str | None:
    """The question's own document id: the first logged one the corpus holds, else the top-ranked."""
    if q.doc_ids:
        return next((d for d in q.doc_ids if d in index), None)
    return ranked[0] if ranked else None


def plan_pairs(
    questions: Sequence[LoggedQuestion],
    rankings: Sequence[Sequence[str]],
    documents: Sequence[Document],
    neighbours: int,
) -> tuple[list[Pair], dict[str, str]]:
    """The pairs to read, and the questions passed over with why (``{log id: reason}``, those
    labelled ``out_of_scope`` aside, which are never lent). ``rankings[i]`` are the document ids
    the retriever ranks for ``questions[i]``, best first."""
    index = {d.id: d for d in documents}
    pairs: list[Pair] = []
    skipped: dict[str, str] = {}
    asked: set[tuple[str, str]] = set()
    for q, ranked in zip(questions, rankings, strict=True):
        if q.label == "out_of_scope":
            continue
        own = _own(q, ranked, index)
        if own is None:
            skipped[q.id] = _NOT_IN_CORPUS if q.doc_ids else "the retriever found nothing"
            continue
        if own not in ranked:
            skipped[q.id] = f"its document {own!r} is not among the retriever's first {len(ranked)}"
            continue
        at, own_text = ranked.index(own), index[own].text.strip()
        near = [(r, d) for r, d in enumerate(ranked[at + 1 :], at + 2) if index[d].text.strip() != own_text]
        for rank, doc_id in near[:neighbours]:
            key = (_norm(q.question), doc_id)
            if key not in asked:
                asked.add(key)
                pairs.append(Pair(log_id=q.id, question=q.question, source_doc=own, doc_id=doc_id, rank=rank))
    return pairs, skipped


class Lender:
    """Lends the questions of a query log to their documents' neighbours (see the module docstring).

    ``generator``: whose filter reads (default: ``Generator()``, the packaged 1.5B's ``logprob``
    reader); its judge, floor and concurrency are used as generation uses them. ``retriever``: a
    :class:`~scopeguard.retrieval.Retriever` instead of ``config.retriever`` by name.
    ``similarity``: a :data:`Similarity` instead of ``config.similarity_model``'s cosines.
    """

    def __init__(
        self,
        generator: Generator | None = None,
        *,
        config: LendingConfig | None = None,
        retriever: Retriever | None = None,
        similarity: Similarity | None = None,
        progress: bool | None = None,
    ) -> None:
        self.generator = generator if generator is not None else Generator(progress=progress)
        if self.generator.judge is None:
            raise ConfigurationError(_NO_FILTER)
        self.config = config or LendingConfig()
        self.retriever = retriever if retriever is not None else get_retriever(self.config.retriever)
        self.similarity = similarity
        self.progress = progress

    def run(
        self,
        corpus: str | os.PathLike[str],
        log: str | os.PathLike[str],
        out_dir: str | os.PathLike[str],
    ) -> LendingSummary:
        """Lend the questions of ``log`` over ``corpus`` into ``out_dir`` (resuming a run there)."""
        return asyncio.run(self.arun(corpus, log, out_dir))

    async def arun(
        self,
        corpus: str | os.PathLike[str],
        log: str | os.PathLike[str],
        out_dir: str | os.PathLike[str],
    ) -> LendingSummary:
        """:meth:`run`, awaited: for a caller already in an event loop."""
        started = time.perf_counter()
        out = Path(out_dir)
        if (out / "run.json").is_file():
            raise ConfigurationError(f"{out} holds a generation run: lend into another folder")
        questions = read_query_log(log)
        documents = corpus_passages(corpus)
        gen = self.generator
        cache = ReplyCache(out / ".cache" / "replies.jsonl")
        recording = RecordingChatModel(gen.judge_llm, cache)
        ledger = UsageLedger()
        judge = gen.judge_for(recording.for_step("filter", ledger))  # the generator's own judge
        if judge is None:
            raise ConfigurationError(_NO_FILTER)
        floor = margin_floor(judge, self.generator.config.oos_margin)
        # the floor may change on a resume: the reads are kept by pair, the files rebuilt from the pairs
        folder = RunFolder(
            out, _RunConfig, config_file=CONFIG_FILE, free=("min_similarity", "similarity_model")
        )
        folder.open(self._run_config(judge, floor))

        pairs, skipped = plan_pairs(
            questions, self._rankings(questions, documents), documents, self.config.neighbours
        )
        _check_doc_ids(questions, skipped, log, corpus)
        planned = len(pairs)
        pairs = alike_pairs(pairs, documents, self.config, self.similarity)
        for log_id, why in skipped.items():
            logger.warning("%s: not lent: %s", log_id, why)
        reads = JsonlLog(out / READS_FILE)
        done = reads.keys(lambda row: (row["log_id"], row["doc_id"]))
        todo = [p for p in pairs if (p.log_id, p.doc_id) not in done]
        by_id = {d.id: d for d in documents}
        order = {d.id: i for i, d in enumerate(documents)}
        todo.sort(key=lambda p: order[p.doc_id])  # one document's questions in turn: its read is kept
        failed = 0
        bar = progress_meter(total=len(todo), desc="lend", enabled=self.progress)
        slots = asyncio.Semaphore(gen.concurrency if isinstance(gen.concurrency, int) else 4)

        async def one(pair: Pair) -> None:
            nonlocal failed
            async with slots:
                ctx = self._context(by_id[pair.doc_id], recording, ledger, judge)
                filt = await ctx.filter_question(pair.question)
            bar.update(1)
            if filt is None or filt.error is not None:
                failed += 1
                why = filt.error if filt is not None else "no verdict"
                logger.warning(
                    "%s asked of %s: read failed, retried next run: %s", pair.log_id, pair.doc_id, why
                )
                return
            reads.append(_read(pair, filt, floor))

        try:
            await asyncio.gather(*(one(p) for p in todo))
        finally:
            bar.close()
            cache.close()
            counts = _rebuild(out, reads, pairs, documents)
        return LendingSummary(
            out_dir=str(out),
            retriever=self.retriever.name,
            filter=gen.filter_name,
            floor=floor,
            log_questions=len(questions),
            not_lent=sum(q.label == "out_of_scope" for q in questions),
            skipped=len(skipped),
            pairs=len(pairs),
            unlike=planned - len(pairs),
            min_similarity=self.config.min_similarity,
            read_run=len(todo) - failed,
            resumed=len(pairs) - len(todo),
            failed_run=failed,
            kept=sum(counts.values()),
            documents_asked=len({p.doc_id for p in pairs}),
            documents=len(counts),
            documents_with_2=sum(n >= 2 for n in counts.values()),
            corpus_documents=len(documents),
            seconds=time.perf_counter() - started,
        )

    def _context(
        self, doc: Document, recording: RecordingChatModel, ledger: UsageLedger, judge: Detector
    ) -> DocumentContext:
        """One neighbour read as the generator's filter reads a document of its own."""
        return DocumentContext(doc, 0, recording.for_step("filter", ledger), judge, self.generator.config)

    def _run_config(self, judge: Detector, floor: float) -> _RunConfig:
        identity = detector_identity(judge)
        if not isinstance(self.generator.judge, Detector):  # built on the judge LLM
            identity["llm"] = self.generator.judge_llm.name
        return _RunConfig(
            **{**self.config.model_dump(), "retriever": self.retriever.name},
            filter=identity,
            floor=round(floor, 6),
        )

    def _rankings(
        self, questions: Sequence[LoggedQuestion], documents: Sequence[Document]
    ) -> list[list[str]]:
        """Each lent question's ranking of the corpus (ids, best first), deep enough to find its own
        document below which the neighbours are taken."""
        lent = [i for i, q in enumerate(questions) if q.label != "out_of_scope"]
        rankings: list[list[str]] = [[] for _ in questions]
        if not lent:
            return rankings
        k = SEARCH_DEPTH + self.config.neighbours + 1
        hits = retrieve(self.retriever, documents, [questions[i].question for i in lent], k)
        for i, found in zip(lent, hits, strict=True):
            rankings[i] = [h.document.id for h in found]
        return rankings


def alike_pairs(
    pairs: list[Pair],
    documents: Sequence[Document],
    config: LendingConfig,
    similarity: Similarity | None = None,
) -> list[Pair]:
    """The pairs whose neighbour and the question's own document are at least
    ``config.min_similarity`` alike, by ``similarity`` (default: cosines of
    ``config.similarity_model``'s embeddings)."""
    if config.min_similarity <= 0.0 or not pairs:
        return pairs
    measure = similarity or _cosines(config.similarity_model)
    text = {d.id: d.text for d in documents}
    scores = measure([text[p.source_doc] for p in pairs], [text[p.doc_id] for p in pairs])
    return [p for p, s in zip(pairs, scores, strict=True) if s >= config.min_similarity]


def _cosines(model: str) -> Similarity:
    """:data:`Similarity` by ``model``'s normalised sentence embeddings, through the embedding
    cache (:class:`~scopeguard.retrieval.dense.SentenceEncoder`: texts the retriever embedded with
    the same model are not embedded again)."""

    def similarity(firsts: Sequence[str], seconds: Sequence[str]) -> list[float]:
        from scopeguard.retrieval.dense import SentenceEncoder

        feature = "The lending similarity floor (--min-similarity 0 lends without it)"
        require("sentence_transformers", extra="embeddings", feature=feature)
        unique = sorted({*firsts, *seconds})
        at = dict(zip(unique, SentenceEncoder(model, show_progress=False).encode(unique), strict=True))
        return [float(at[a] @ at[b]) for a, b in zip(firsts, seconds, strict=True)]

    return similarity


def _check_doc_ids(
    questions: Sequence[LoggedQuestion], skipped: dict[str, str], log: object, corpus: object
) -> None:
    """An :class:`InputError` when the log names documents and none of them is in the corpus: the
    log was made over another corpus (or names chunks, not documents)."""
    named = [q for q in questions if q.doc_ids and q.label != "out_of_scope"]
    if named and all(skipped.get(q.id) == _NOT_IN_CORPUS for q in named):
        raise InputError(
            f"{log}: none of its doc_ids is a document of {corpus} (the first: {named[0].doc_ids[0]!r}); "
            "lend over the corpus the log's retriever read, or leave doc_ids out"
        )


def _read(pair: Pair, filt: FilterRecord, floor: float) -> LentRead:
    """The record of one read: kept as the keeper keeps, out of scope with P at least ``floor``."""
    kept = filt.label == "out_of_scope" and (filt.score is None or filt.score >= floor)
    score = None if filt.score is None else round(filt.score, 4)
    return LentRead(**pair.model_dump(), label=filt.label, score=score, kept=kept)


def _rebuild(
    out: Path, reads: JsonlLog, pairs: Sequence[Pair], documents: Sequence[Document]
) -> Counter[str]:
    """Rewrite documents.jsonl and questions.jsonl from the reads of this log's ``pairs``; returns
    the lent questions per document."""
    planned = {(p.log_id, p.doc_id): i for i, p in enumerate(pairs)}
    kept: dict[int, LentRead] = {}
    for row in reads.records(LentRead):
        at = planned.get((row.log_id, row.doc_id))
        if row.kept and at is not None:
            kept[at] = row
    counts = Counter(r.doc_id for r in kept.values())
    with jsonl_writer(out / DOCUMENTS_FILE) as write:
        for d in documents:
            if d.id in counts:
                write({**d.metadata, "doc_id": d.id, "text": d.text})
    with jsonl_writer(out / QUESTIONS_FILE) as write:
        for at in sorted(kept):
            r = kept[at]
            write(
                {
                    "id": f"{r.log_id}@{r.doc_id}",
                    "doc_id": r.doc_id,
                    "question": r.question,
                    "label": "out_of_scope",
                    "lent_from": r.log_id,
                    "source_doc": r.source_doc,
                    "rank": r.rank,
                    "score": r.score,
                }
            )
    return counts
