"""BM25 retrievers: rank-bm25 (``bm25``) and bm25s (``bm25s``), scoring the same Lucene formula.

The ELOQ paper ran BM25 through Pyserini (Lucene). Lucene's BM25 (since Lucene 8) scores a term as

    idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)),   idf = log(1 + (N - n + 0.5) / (n + 0.5))

with Pyserini's defaults ``k1=0.9, b=0.4``. ``variant="lucene"`` (the default) reproduces that
formula on top of rank-bm25 (whose own ``BM25Okapi`` uses a different idf with a floor for
frequent terms; ``variant="okapi"`` keeps it). ``bm25s`` computes the same Lucene scores with sparse
matrices. Both share one analyzer: lower-case word tokens minus Lucene's English stop words (no
stemming, unlike Pyserini's Porter stemmer). Ties are ranked in document order, and, as in Lucene,
documents that share no term with the query are not returned (a search may give fewer than k hits).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from scopeguard._optional import require
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.retrieval._ranking import IndexedDocuments, check_documents, hits_from_scores, validate_query
from scopeguard.retrieval.base import Hit, check_k
from scopeguard.types import Document

__all__ = ["LUCENE_STOP_WORDS", "BM25Retriever", "BM25sRetriever", "tokenize"]

logger = logging.getLogger(__name__)

_STOP_TEXT = (
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with"
)
LUCENE_STOP_WORDS = frozenset(_STOP_TEXT.split())
"""Lucene's default English stop set (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``)."""

_WORD = re.compile(r"\w+", re.UNICODE)


def tokenize(text: str, *, stop_words: frozenset[str] = LUCENE_STOP_WORDS) -> list[str]:
    """Lower-case word tokens of ``text`` without stop words."""
    return [t for t in _WORD.findall(text.lower()) if t not in stop_words]


def _check_params(k1: float, b: float) -> None:
    # k1 = 0 (binary term weights) would make rank-bm25 divide 0 by 0 for absent terms
    if not math.isfinite(k1) or k1 <= 0:
        raise ConfigurationError(f"k1 must be a finite number > 0, got {k1!r}")
    if not 0.0 <= b <= 1.0:
        raise ConfigurationError(f"b must be in [0, 1], got {b!r}")


class _BM25Base(IndexedDocuments):
    """Shared plumbing: validation, tokenisation, ranking. Subclasses provide ``_scores``."""

    name = "bm25"

    def __init__(
        self,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        _check_params(k1, b)
        self.k1 = float(k1)
        self.b = float(b)
        self.tokenizer = tokenizer
        self._documents: list[Document] = []
        self._model: Any = None

    def index(self, documents: Sequence[Document]) -> None:
        """Index ``documents`` (replacing any earlier index)."""
        docs = check_documents(documents)
        tokens = [self.tokenizer(d.text) for d in docs]
        if not any(tokens):
            raise InputError("no document has any indexable word (all empty or stop words)")
        self._build(tokens)
        self._documents = docs
        logger.info("%s: indexed %d documents", self.name, len(docs))

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        """The BM25 score of every indexed document for ``query``, in document order."""
        validate_query(query)
        if not self._documents:
            raise InputError(f"{self.name}: call index(documents) before searching")
        q = self.tokenizer(query)
        if not q:
            return np.zeros(len(self._documents))
        return np.asarray(self._scores(q), dtype=np.float64)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        check_k(k)
        # as in Lucene, a document sharing no term with the query is not a hit
        return [h for h in hits_from_scores(self._documents, self.scores(query), k) if h.score > 0.0]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def _build(self, tokens: list[list[str]]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _scores(self, query_tokens: list[str]) -> npt.ArrayLike:  # pragma: no cover - abstract
        raise NotImplementedError


class BM25Retriever(_BM25Base):
    """BM25 with rank-bm25 (``pip install 'scopeguard[retrieval]'``).

    Args:
        k1, b: BM25 parameters (Pyserini defaults 0.9 and 0.4).
        variant: ``"lucene"`` (Lucene's idf and tf normalisation, the paper's setting) or
            ``"okapi"`` (rank-bm25's own BM25Okapi, idf floored at ``epsilon * mean idf``).
        tokenizer: text -> tokens; defaults to :func:`tokenize`.
    """

    name = "bm25"

    def __init__(
        self,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        variant: Literal["lucene", "okapi"] = "lucene",
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        super().__init__(k1=k1, b=b, tokenizer=tokenizer)
        if variant not in ("lucene", "okapi"):
            raise ConfigurationError(f"unknown BM25 variant {variant!r}; valid: lucene, okapi")
        self.variant = variant

    def _build(self, tokens: list[list[str]]) -> None:
        rank_bm25 = require("rank_bm25", extra="retrieval", feature="BM25 retrieval", package="rank-bm25")
        if self.variant == "okapi":
            self._model = rank_bm25.BM25Okapi(tokens, k1=self.k1, b=self.b)
            return

        class _Lucene(rank_bm25.BM25Okapi):  # type: ignore[misc,name-defined]
            def _calc_idf(self, nd: dict[str, int]) -> None:
                for word, freq in nd.items():
                    self.idf[word] = math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))

        self._model = _Lucene(tokens, k1=self.k1, b=self.b)

    def _scores(self, query_tokens: list[str]) -> npt.ArrayLike:
        s = np.asarray(self._model.get_scores(query_tokens), dtype=np.float64)
        # rank-bm25 multiplies by (k1 + 1); Lucene 8+ dropped that constant factor
        return s / (self.k1 + 1.0) if self.variant == "lucene" else s


class BM25sRetriever(_BM25Base):
    """The same Lucene BM25 scores computed by bm25s (sparse matrices; faster on large corpora)."""

    name = "bm25s"

    def _build(self, tokens: list[list[str]]) -> None:
        bm25s = require("bm25s", extra="retrieval", feature="BM25 retrieval with bm25s")
        bm25s_logger = logging.getLogger("bm25s")
        if bm25s_logger.level == logging.DEBUG:  # bm25s forces DEBUG on import; follow the app's level
            bm25s_logger.setLevel(logging.NOTSET)
        model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene", idf_method="lucene")
        model.index(tokens, show_progress=False)
        self._model = model

    def _scores(self, query_tokens: list[str]) -> npt.ArrayLike:
        return self._model.get_scores(query_tokens)
