"""Dense retrieval: sentence-transformers embeddings in a FAISS index.

Vectors are L2-normalised, so inner product is cosine similarity. ``index_type="flat"`` (default) is
exact search; ``"hnsw"`` and ``"ivf"`` are approximate indexes for large corpora. Embeddings are
computed in batches with a progress bar and cached on disk by model and content hash
(:mod:`scopeguard.retrieval.embedding_cache`), so re-indexing a corpus is free.

Query/document prompts: each model family expects its own (BGE a query instruction, Stella the
prompt named ``s2p_query`` in its config, Linq an ``Instruct: ...\\nQuery: `` template); the
registry (:mod:`scopeguard.retrieval.registry`) sets them. Ties rank in document order.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from scopeguard import _progress
from scopeguard._optional import require
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.retrieval._ranking import IndexedDocuments, check_documents, check_k, validate_query
from scopeguard.retrieval.base import Hit
from scopeguard.retrieval.embedding_cache import EmbeddingCache, text_key
from scopeguard.types import Document

__all__ = ["DenseRetriever", "SentenceEncoder", "load_sentence_transformer"]

logger = logging.getLogger(__name__)

IndexType = Literal["flat", "hnsw", "ivf"]
_TIE_MARGIN = 16  # extra candidates fetched from FAISS so ties at the k-th place rank in document order


def load_sentence_transformer(
    model: str, *, device: str | None = None, trust_remote_code: bool = False
) -> Any:
    """Load a SentenceTransformer once per process (see :func:`scopeguard.models.sentence_model`).

    ``minilm`` / ``mpnet`` (and their hub names) resolve to the packaged offline copies; any other
    hub name or local path loads directly. Raises :class:`ModelError` naming the model and why it
    could not be had (offline, unreachable).
    """
    from scopeguard.models import sentence_model

    return sentence_model(model, device=device or "cpu", trust_remote_code=trust_remote_code)


class SentenceEncoder:
    """Embeds texts with one sentence-transformers model, through the on-disk cache.

    Args:
        model: hub name, local path, or ``minilm`` / ``mpnet`` (packaged copies).
        query_prompt / document_prompt: literal text prepended to queries / documents.
        query_prompt_name / document_prompt_name: a prompt defined in the model's own config
            (``model.prompts``), such as Stella's ``s2p_query``; resolved to its text.
        batch_size: texts per forward pass. max_seq_length: truncate inputs (model default if None).
        cache: use the embedding cache; cache_dir: its root (default ``$SCOPEGUARD_CACHE/embeddings``).
        show_progress: progress bar; ``None`` shows it only on a terminal.
    """

    def __init__(
        self,
        model: str = "minilm",
        *,
        query_prompt: str = "",
        document_prompt: str = "",
        query_prompt_name: str | None = None,
        document_prompt_name: str | None = None,
        batch_size: int = 32,
        max_seq_length: int | None = None,
        device: str | None = None,
        trust_remote_code: bool = False,
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
        show_progress: bool | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError("model must be a non-empty model name or path")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        self.model_name = model
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt
        self.query_prompt_name = query_prompt_name
        self.document_prompt_name = document_prompt_name
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.device = device
        self.trust_remote_code = trust_remote_code
        self.show_progress = show_progress
        self._cache = EmbeddingCache(model, cache_dir) if cache else None
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(
                self.model_name, device=self.device, trust_remote_code=self.trust_remote_code
            )
            if self.max_seq_length is not None:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    def _prompt(self, literal: str, name: str | None) -> str:
        if name is None:
            return literal
        prompts = dict(getattr(self.model, "prompts", None) or {})
        if name not in prompts:
            valid = ", ".join(sorted(prompts)) or "none"
            raise ConfigurationError(
                f"model {self.model_name!r} defines no prompt named {name!r}; its prompts: {valid}"
            )
        return literal + str(prompts[name])

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.encode(texts, prompt=self._prompt(self.query_prompt, self.query_prompt_name))

    def encode_documents(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.encode(texts, prompt=self._prompt(self.document_prompt, self.document_prompt_name))

    def encode(self, texts: Sequence[str], *, prompt: str = "") -> npt.NDArray[np.float32]:
        """L2-normalised float32 embeddings of ``prompt + text`` for each text (cached)."""
        texts = list(texts)
        if not texts:
            raise InputError("nothing to encode: no texts given")
        variant = f"max_seq_length={self.max_seq_length}"
        keys = [text_key(t, prompt=prompt, variant=variant) for t in texts]
        found: list[npt.NDArray[np.float32] | None] = (
            self._cache.get(keys) if self._cache is not None else [None] * len(texts)
        )
        todo = [i for i, v in enumerate(found) if v is None]
        if todo:
            self._encode_missing(texts, keys, todo, prompt, found)
        out = np.stack([np.asarray(v, dtype=np.float32) for v in found])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1.0, norms)).astype(np.float32)

    def _encode_missing(
        self,
        texts: list[str],
        keys: list[str],
        todo: list[int],
        prompt: str,
        found: list[npt.NDArray[np.float32] | None],
    ) -> None:
        from tqdm.auto import tqdm

        model = self.model
        chunk = max(self.batch_size * 8, 64)  # one cache shard per chunk: a kill loses at most one
        show = _progress.show_progress(self.show_progress)
        logger.info("%s: encoding %d of %d texts", self.model_name, len(todo), len(texts))
        with tqdm(total=len(todo), desc=f"embed {self.model_name}", unit="text", disable=not show) as bar:
            for start in range(0, len(todo), chunk):
                idx = todo[start : start + chunk]
                vecs = model.encode(
                    [prompt + texts[i] for i in idx],
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=False,
                    show_progress_bar=False,
                )
                vecs = np.asarray(vecs, dtype=np.float32)
                if self._cache is not None:
                    self._cache.put([keys[i] for i in idx], vecs)
                for i, v in zip(idx, vecs, strict=True):
                    found[i] = v
                bar.update(len(idx))


class DenseRetriever(IndexedDocuments):
    """Embedding retriever over a FAISS inner-product index.

    Args:
        model: sentence-transformers hub name or local path (``minilm`` / ``mpnet`` packaged).
        name: the retriever's name in reports (defaults to ``dense:<model>``).
        index_type: ``flat`` (exact), ``hnsw`` (graph, ``hnsw_m`` links) or ``ivf`` (``nlist``
            clusters, ``nprobe`` searched; trained on the corpus, needs at least ``nlist`` documents).
        encoder: a ready :class:`SentenceEncoder` (other encoder keyword arguments are then ignored).
        **encoder_kwargs: passed to :class:`SentenceEncoder` (prompts, batch size, cache, ...).
    """

    def __init__(
        self,
        model: str = "minilm",
        *,
        name: str | None = None,
        index_type: IndexType = "flat",
        hnsw_m: int = 32,
        nlist: int | None = None,
        nprobe: int = 8,
        encoder: SentenceEncoder | None = None,
        **encoder_kwargs: Any,
    ) -> None:
        if index_type not in ("flat", "hnsw", "ivf"):
            raise ConfigurationError(f"unknown index_type {index_type!r}; valid: flat, hnsw, ivf")
        self.encoder = encoder or SentenceEncoder(model, **encoder_kwargs)
        self.name = name or f"dense:{self.encoder.model_name}"
        self.index_type = index_type
        self.hnsw_m = hnsw_m
        self.nlist = nlist
        self.nprobe = nprobe
        self._documents: list[Document] = []
        self._index: Any = None

    def index(self, documents: Sequence[Document]) -> None:
        """Embed and index ``documents`` (replacing any earlier index)."""
        docs = check_documents(documents, nonempty=True)
        self.index_vectors(docs, self.encoder.encode_documents([d.text for d in docs]))

    def index_vectors(self, documents: Sequence[Document], vectors: npt.NDArray[np.float32]) -> None:
        """Index ``documents`` with their ready embeddings (one row each, as ``encoder`` makes them).

        The entry point for embeddings computed elsewhere, such as on a Ray cluster
        (:func:`scopeguard.scale.index_dense`); :meth:`index` embeds, then calls this.
        """
        docs = check_documents(documents, nonempty=True)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(docs):
            raise InputError(
                f"expected one embedding row per document ({len(docs)}), "
                f"got an array of shape {vectors.shape}"
            )
        self._index = self._build(vectors)
        self._documents = docs
        logger.info("%s: indexed %d documents (%s)", self.name, len(docs), self.index_type)

    def _build(self, vectors: npt.NDArray[np.float32]) -> Any:
        faiss = require("faiss", extra="retrieval", feature="dense retrieval", package="faiss-cpu")
        n, dim = vectors.shape
        if self.index_type == "flat":
            index = faiss.IndexFlatIP(dim)
        elif self.index_type == "hnsw":
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        else:
            nlist = self.nlist or max(1, round(4 * float(np.sqrt(n))))
            if n < nlist:
                raise InputError(f"an IVF index with nlist={nlist} needs at least {nlist} documents, got {n}")
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)
            index.nprobe = min(self.nprobe, nlist)
        index.add(vectors)
        return index

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """Top-``k`` hits for each query, by cosine similarity (ties in document order)."""
        k = check_k(k)
        queries = [validate_query(q) for q in queries]
        if self._index is None:
            raise InputError(f"{self.name}: call index(documents) before searching")
        if not queries:
            return []
        n = len(self._documents)
        depth = min(n, k + _TIE_MARGIN)
        scores, ids = self._index.search(self.encoder.encode_queries(queries), depth)
        results: list[list[Hit]] = []
        for row_s, row_i in zip(scores, ids, strict=True):
            keep = row_i >= 0  # approximate indexes pad with -1 when they find fewer
            row_s, row_i = row_s[keep], row_i[keep]
            order = np.lexsort((row_i, -row_s))[: min(k, n)]
            results.append(
                [
                    Hit(document=self._documents[int(row_i[j])], score=float(row_s[j]), rank=r)
                    for r, j in enumerate(order, 1)
                ]
            )
        return results
