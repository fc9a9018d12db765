"""Stream MS MARCO-format files: ``collection.tsv``, ``queries.tsv`` and qrels.

Layout (https://github.com/microsoft/MSMARCO-Passage-Ranking)::

    collection.tsv   pid \\t passage            (8.8M lines for the full V1 collection)
    queries.tsv      qid \\t query
    qrels            qid 0 pid rel              (TREC; tabs or spaces)
                     qid \\t pid                 (2 columns)   or   qid \\t pid \\t rel (3 columns)

Everything is read lazily with generators (``.gz`` files too), so the collection never has
to fit in memory. Indexing it does: a BM25 index over the full collection needs the memory of
the index itself (several GiB). To work on a laptop, index a subset: the first
``limit`` passages, or :func:`sample_collection` (the judged passages of the qrels plus
``negatives`` passages drawn uniformly at random in one streaming pass).
"""

from __future__ import annotations

import gzip
import io
import logging
import os
import random
from collections.abc import Container, Iterator
from dataclasses import dataclass
from pathlib import Path

from scopeguard.errors import DatasetError
from scopeguard.types import Document

__all__ = ["Query", "iter_collection", "iter_queries", "read_qrels", "sample_collection"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Query:
    """One line of ``queries.tsv``."""

    id: str
    text: str


def _open(path: str | os.PathLike[str]) -> io.TextIOBase:
    p = Path(path)
    if not p.is_file():
        raise DatasetError("file not found", path=str(p))
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8", newline="\n")
    return p.open(encoding="utf-8", newline="\n")  # type: ignore[return-value]


def _id_text_lines(path: str | os.PathLike[str], what: str) -> Iterator[tuple[str, str, int]]:
    """(id, text, line number) of a two-column ``id \\t text`` file; blank lines are skipped."""
    with _open(path) as fh:
        try:
            for lineno, line in enumerate(fh, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                ident, sep, text = line.partition("\t")
                if not sep or not ident.strip():
                    raise DatasetError(
                        f"expected '{what}_id<TAB>text', got {line[:60]!r}", path=str(path), line=lineno
                    )
                if not text.strip():
                    raise DatasetError(
                        f"{what} {ident.strip()!r} has empty text", path=str(path), line=lineno
                    )
                yield ident.strip(), text.strip(), lineno
        except UnicodeDecodeError:
            raise DatasetError("file is not UTF-8 text", path=str(path)) from None


def iter_collection(
    path: str | os.PathLike[str], *, pids: Container[str] | None = None, limit: int | None = None
) -> Iterator[Document]:
    """Stream passages of ``collection.tsv`` as :class:`Document` (id = pid).

    ``pids`` keeps only those passage ids; ``limit`` stops after that many passages are yielded.
    """
    if limit is not None and limit < 1:
        raise DatasetError(f"limit must be >= 1, got {limit}", path=str(path))
    n = 0
    for pid, text, _ in _id_text_lines(path, "passage"):
        if pids is not None and pid not in pids:
            continue
        yield Document(id=pid, text=text)
        n += 1
        if limit is not None and n >= limit:
            return


def iter_queries(path: str | os.PathLike[str], *, qids: Container[str] | None = None) -> Iterator[Query]:
    """Stream ``queries.tsv`` (``qid \\t query``), optionally only the ids in ``qids``."""
    for qid, text, _ in _id_text_lines(path, "query"):
        if qids is None or qid in qids:
            yield Query(id=qid, text=text)


def read_qrels(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """``{qid: {pid: relevance}}`` from TREC (4 columns), ``qid pid rel`` or ``qid pid`` qrels.

    Tabs or spaces separate columns; two-column lines mean relevance 1. Qrels are small
    (tens of thousands of lines), so they are read into memory.
    """
    qrels: dict[str, dict[str, int]] = {}
    with _open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            cols = line.split()
            if not cols:
                continue
            if len(cols) == 4:
                qid, _, pid, rel = cols
            elif len(cols) == 3:
                qid, pid, rel = cols
            elif len(cols) == 2:
                (qid, pid), rel = cols, "1"
            else:
                raise DatasetError(
                    f"expected 'qid 0 pid rel', 'qid pid rel' or 'qid pid', got {len(cols)} columns",
                    path=str(path),
                    line=lineno,
                )
            try:
                relevance = int(rel)
            except ValueError:
                if lineno == 1:  # a header line such as "query-id corpus-id score"
                    continue
                raise DatasetError(
                    f"relevance must be an integer, got {rel!r}", path=str(path), line=lineno
                ) from None
            qrels.setdefault(qid, {})[pid] = relevance
    if not qrels:
        raise DatasetError("qrels file has no judgements", path=str(path))
    return qrels


def sample_collection(
    path: str | os.PathLike[str],
    qrels: dict[str, dict[str, int]],
    *,
    negatives: int = 1000,
    seed: int = 0,
) -> list[Document]:
    """The judged passages of ``qrels`` plus ``negatives`` other passages sampled uniformly.

    One streaming pass with reservoir sampling: memory is the judged passages plus the
    reservoir, whatever the collection size. The result is in collection order.
    """
    if negatives < 0:
        raise DatasetError(f"negatives must be >= 0, got {negatives}", path=str(path))
    judged = {pid for rels in qrels.values() for pid in rels}
    rng = random.Random(seed)
    kept: list[tuple[int, Document]] = []
    reservoir: list[tuple[int, Document]] = []
    seen_other = 0
    for i, doc in enumerate(iter_collection(path)):
        if doc.id in judged:
            kept.append((i, doc))
            continue
        seen_other += 1
        if len(reservoir) < negatives:
            reservoir.append((i, doc))
        else:
            j = rng.randrange(seen_other)
            if j < negatives:
                reservoir[j] = (i, doc)
    missing = judged - {d.id for _, d in kept}
    if missing:
        logger.warning(
            "%d judged passage id(s) are not in %s, e.g. %s", len(missing), path, sorted(missing)[:3]
        )
    return [doc for _, doc in sorted(kept + reservoir, key=lambda t: t[0])]
