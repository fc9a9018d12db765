"""Detector features on Ray actors: the nli embeddings, the probe's hidden states, the fast features.

:func:`extract_features` takes the extractor of a learned detector and returns what its
``batch_features(pairs)`` returns; :func:`extract_fast_features` returns the fast detector's raw
features (``FastFeaturizer.features``) for many items. Every path runs on :func:`map_texts`.

- nli (:class:`~scopeguard.detection.read.embeddings.EmbeddingFeatures`): each distinct text is
  embedded once on the actors; the driver combines ``[u; v; |u-v|]``.
- probe (:class:`~scopeguard.detection.read.hidden_states.HiddenStateFeatures`) and fast: the items are
  grouped by document, one Ray row per document with all its questions, so one actor reads a
  document once (llama.cpp keeps its KV prefix, the fast featurizer its token vectors).

The probe and fast caches stay with the driver (workers may not share its disk): the driver
looks every item up in its cache first, sends only the misses to Ray and writes the returned rows
into its cache. A resumed or repeated extraction is therefore free, and the single-process
training paths (``train-detector``,
:func:`scopeguard.detection.head.fitting.fit_detector`) read the same cache.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scopeguard.detection.read.features import FeatureCache, stable_hash
from scopeguard.errors import ConfigurationError, InputError, ModelError
from scopeguard.scale._ray import DEFAULT_BATCH_SIZE, map_texts
from scopeguard.types import Document

__all__ = ["DEFAULT_GROUPS_PER_BATCH", "extract_fast_features", "extract_features"]

logger = logging.getLogger(__name__)

DEFAULT_GROUPS_PER_BATCH = 8  # documents (with all their questions) per UDF call


class FeatureEmbedder:
    """Ray Data UDF: the ``u`` / ``v`` embeddings of :class:`EmbeddingFeatures` (the ``nli`` features)."""

    def __init__(self, identity: dict[str, Any], batch_size: int) -> None:
        from scopeguard.detection.read.embeddings import EmbeddingFeatures

        self.features = EmbeddingFeatures.from_identity(identity, batch_size=batch_size)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.features.embed([str(t) for t in batch["text"]], persist=False)
        return {"i": batch["i"], "vector": vectors}


class _GroupWorker:
    """Ray Data UDF base: each row is one document group ``{"documents": [...], "questions":
    [[row, question], ...]}``; returns one feature row per question."""

    def prepare(self, documents: list[str]) -> Any:
        return documents

    def row(self, documents: Any, question: str) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        positions: list[int] = []
        vectors: list[np.ndarray] = []
        for payload in batch["text"]:
            group = json.loads(str(payload))
            documents = self.prepare(group["documents"])
            for j, question in group["questions"]:
                positions.append(int(j))
                vectors.append(np.asarray(self.row(documents, question), dtype=np.float32))
        return {"i": np.asarray(positions, dtype=np.int64), "vector": np.stack(vectors)}


class HiddenStateWorker(_GroupWorker):
    """The probe's hidden states, the extractor rebuilt from its identity (model opened once)."""

    def __init__(self, identity: dict[str, Any], n_threads: int, strict: bool) -> None:
        from scopeguard.detection.read.hidden_states import HiddenStateFeatures

        try:
            features = HiddenStateFeatures.from_identity(identity, n_threads=n_threads, strict=strict)
            mine = features.identity  # opens the model now, not in the first batch
        except ModelError as exc:
            raise ModelError(
                f"the Ray worker on {socket.gethostname()} cannot open the probe's model "
                f"{identity['model']!r} ({exc}); on a cluster the model path must exist on every "
                f"node (or name a packaged model installed there)"
            ) from None
        if mine != identity:
            raise ModelError(
                f"the Ray worker on {socket.gethostname()} opened a different model at "
                f"{identity['model']!r}: its identity {mine} is not the driver's {identity}"
            )
        self.features = features

    def row(self, documents: list[str], question: str) -> np.ndarray:
        # the single-process computation of HiddenStateFeatures, without its (driver-side) cache
        ids, prefix_len, _ = self.features.build_input(question, documents[0])
        return self.features.backend.last_hidden(ids, prefix_len)


class FastFeatureWorker(_GroupWorker):
    """The fast detector's raw features (``coverage``, ``alignment``) from a :class:`FastFeaturizer`."""

    def __init__(self, encoder: str) -> None:
        from scopeguard.detection.read.fast import FEATURES, FastFeaturizer

        self.featurizer = FastFeaturizer(encoder)
        self.names = FEATURES

    def prepare(self, documents: list[str]) -> Any:
        return [Document(text=t) for t in documents]

    def row(self, documents: list[Document], question: str) -> np.ndarray:
        values = self.featurizer.features(question, documents)
        return np.array([values[name] for name in self.names], dtype=np.float32)


def cached_groups(
    cache: FeatureCache,
    keys: Sequence[str],
    questions: Sequence[str],
    documents: Sequence[tuple[str, ...]],
    run: Callable[[list[str], int], npt.NDArray[np.float32]],
) -> npt.NDArray[np.float32]:
    """Rows for ``keys`` from ``cache``; the misses (each key once) go to ``run`` grouped by
    document, and what it returns is written into ``cache``. Rows come back in input order."""
    found: dict[str, np.ndarray] = {}
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key not in first:
            first[key] = i
            hit = cache.get(key)
            if hit is not None:
                found[key] = hit
    todo = [k for k in first if k not in found]
    logger.info("%d of %d items cached; %d to compute on Ray", len(keys) - len(todo), len(keys), len(todo))
    if todo:
        groups: dict[tuple[str, ...], list[tuple[int, str]]] = {}
        for j, key in enumerate(todo):
            i = first[key]
            groups.setdefault(documents[i], []).append((j, questions[i]))
        payloads = [json.dumps({"documents": list(d), "questions": qs}) for d, qs in groups.items()]
        for key, vec in zip(todo, run(payloads, len(todo)), strict=True):
            cache.put(key, vec)
            found[key] = vec
    return np.stack([found[k] for k in keys]).astype(np.float32)


def extract_features(
    extractor: Any,
    pairs: Sequence[tuple[str, Document]],
    *,
    concurrency: int = 2,
    batch_size: int | None = None,
    address: str | None = None,
    num_cpus_per_actor: float = 1,
) -> npt.NDArray[np.float32]:
    """``extractor.batch_features(pairs)`` computed on Ray actors (rows in input order).

    ``extractor`` is an :class:`~scopeguard.detection.read.embeddings.EmbeddingFeatures` (the ``nli``
    detector's ``[u; v; |u-v|]``; each distinct text embedded once; ``batch_size`` texts per UDF
    call, default 256) or a :class:`~scopeguard.detection.read.hidden_states.HiddenStateFeatures` (the
    probe's; ``batch_size`` documents per call, default 8). For the probe, the driver opens the
    model once (the identity needs its tokens), reads and fills the extractor's cache, and each
    actor reopens the model from ``extractor.identity`` with ``num_cpus_per_actor`` threads: on a
    cluster ``extractor.llm`` must be a path present on every node or a packaged model installed
    there, else a :class:`~scopeguard.errors.ModelError` says which node could not open it.
    """
    from scopeguard.detection.read.embeddings import EmbeddingFeatures
    from scopeguard.detection.read.hidden_states import HiddenStateFeatures

    if not isinstance(extractor, (EmbeddingFeatures, HiddenStateFeatures)):
        raise ConfigurationError(
            "Ray feature extraction supports EmbeddingFeatures (the nli detector) and "
            f"HiddenStateFeatures (the probe), got {type(extractor).__name__}"
        )
    if not pairs:
        raise InputError("nothing to extract: no (question, document) pairs given")
    ray_kwargs: dict[str, Any] = {
        "concurrency": concurrency,
        "address": address,
        "num_cpus_per_actor": num_cpus_per_actor,
    }
    if isinstance(extractor, HiddenStateFeatures):
        worker = {
            "identity": extractor.identity,
            "n_threads": max(1, round(num_cpus_per_actor)),
            "strict": extractor.strict,
        }

        def run(payloads: list[str], n_out: int) -> npt.NDArray[np.float32]:
            return map_texts(
                payloads,
                HiddenStateWorker,
                worker,
                batch_size=batch_size or DEFAULT_GROUPS_PER_BATCH,
                n_out=n_out,
                **ray_kwargs,
            )

        return cached_groups(
            extractor.cache,
            [stable_hash(d.text, q) for q, d in pairs],
            [q for q, _ in pairs],
            [(d.text,) for _, d in pairs],
            run,
        )
    texts = list(dict.fromkeys([d.text for _, d in pairs] + [q for q, _ in pairs]))
    vectors = map_texts(
        texts,
        FeatureEmbedder,
        {"identity": extractor.identity, "batch_size": extractor.batch_size},
        batch_size=batch_size or DEFAULT_BATCH_SIZE,
        **ray_kwargs,
    )
    row = {t: i for i, t in enumerate(texts)}
    u = vectors[[row[d.text] for _, d in pairs]]
    v = vectors[[row[q] for q, _ in pairs]]
    return extractor.combine(u, v)


def extract_fast_features(
    items: Sequence[tuple[str, Document | Sequence[Document]]],
    *,
    encoder: str = "minilm",
    cache_root: str | os.PathLike[str] | None = None,
    concurrency: int = 2,
    batch_size: int = DEFAULT_GROUPS_PER_BATCH,
    address: str | None = None,
    num_cpus_per_actor: float = 1,
) -> npt.NDArray[np.float32]:
    """The fast detector's raw features of many ``(question, document or documents)`` items, on Ray.

    Returns ``(n, 2)`` float32, columns in :data:`scopeguard.detection.detectors.fast.FEATURES` order
    (``coverage``, ``alignment``), each row equal to ``FastFeaturizer(encoder).features(question,
    documents)``. Items are grouped by their documents, so each is embedded once (``batch_size``
    documents per UDF call). The values are cached with the driver in
    :func:`scopeguard.detection.signals.fast_feature_cache` (``cache_root``: default
    ``$SCOPEGUARD_CACHE/features``), the cache that ``scopeguard train-detector --detector fast``
    reads: extracting a corpus here first makes training pay nothing for features.
    """
    from scopeguard.detection.signals import fast_feature_cache, fast_feature_key

    if not items:
        raise InputError("nothing to extract: no (question, documents) items given")
    questions: list[str] = []
    documents: list[tuple[Document, ...]] = []
    for question, docs in items:
        group = (docs,) if isinstance(docs, Document) else tuple(docs)
        if not group or not all(isinstance(d, Document) for d in group):
            raise InputError(f"item {question!r}: give a Document or a non-empty list of Documents")
        questions.append(question)
        documents.append(group)

    def run(payloads: list[str], n_out: int) -> npt.NDArray[np.float32]:
        return map_texts(
            payloads,
            FastFeatureWorker,
            {"encoder": encoder},
            concurrency=concurrency,
            batch_size=batch_size,
            address=address,
            num_cpus_per_actor=num_cpus_per_actor,
            n_out=n_out,
        )

    return cached_groups(
        fast_feature_cache(encoder, root=cache_root),
        [fast_feature_key(q, docs) for q, docs in zip(questions, documents, strict=True)],
        questions,
        [tuple(d.text for d in docs) for docs in documents],
        run,
    )
