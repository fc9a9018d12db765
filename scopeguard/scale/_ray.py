"""Ray Data for the corpus-scale embedding work: one class-based UDF per model, vectors back in order.

Texts go into a Ray dataset with their position (``ray.data.from_items``), ``map_batches`` runs a
class-based UDF on ``concurrency`` actors (each loads its model once, in its constructor), and the
driver collects the vectors and puts them back in input order. The UDFs call the single-process
code (:class:`~scopeguard.retrieval.dense.SentenceEncoder`,
:class:`~scopeguard.features.embeddings.EmbeddingFeatures`), so the results equal it up to float
rounding of different batch shapes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from scopeguard._optional import require
from scopeguard.errors import ConfigurationError, InputError
from scopeguard.types import Document

__all__ = ["embed_documents", "extract_features", "index_dense", "ray_session", "require_ray"]

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 256  # texts per UDF call (the model still runs its own batch_size)


def require_ray(feature: str = "Ray Data scale-out") -> ModuleType:
    """``ray`` with its Data library, or a :class:`MissingDependencyError` naming ``scopeguard[ray]``."""
    require("ray.data", extra="ray", feature=feature, package="ray[data]")
    return require("ray", extra="ray", feature=feature, package="ray[data]")


def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> ModuleType:
    """Connect to Ray once: an already initialised Ray is used as is; else ``ray.init``.

    ``address`` is ``None`` (a local Ray with ``num_cpus`` cores), ``"auto"`` (the cluster this
    machine belongs to) or ``"ray://HEAD:10001"`` (a remote cluster through Ray Client). The session
    is left running for later calls; ``ray.shutdown()`` ends it.
    """
    ray = require_ray()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "ignore_reinit_error": True}
        if address is not None:
            kwargs["address"] = address
        elif num_cpus is not None:
            kwargs["num_cpus"] = num_cpus
        logger.info("starting Ray (%s)", address or f"local, {num_cpus or 'all'} CPUs")
        ray.init(**kwargs)
    return ray


class DocumentEmbedder:
    """Ray Data UDF: document embeddings of a :class:`SentenceEncoder` (model loaded once per actor)."""

    def __init__(self, encoder: dict[str, Any]) -> None:
        from scopeguard.retrieval.dense import SentenceEncoder

        # workers may not share the driver's disk, so the embedding cache stays with the driver
        self.encoder = SentenceEncoder(**encoder, cache=False, show_progress=False)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.encoder.encode_documents([str(t) for t in batch["text"]])
        return {"i": batch["i"], "vector": vectors}


class FeatureEmbedder:
    """Ray Data UDF: the ``u`` / ``v`` embeddings of :class:`EmbeddingFeatures` (the ``nli`` features)."""

    def __init__(self, identity: dict[str, Any], batch_size: int) -> None:
        from scopeguard.features.embeddings import EmbeddingFeatures

        self.features = EmbeddingFeatures.from_identity(identity, batch_size=batch_size)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.features.embed([str(t) for t in batch["text"]], persist=False)
        return {"i": batch["i"], "vector": vectors}


def map_texts(
    texts: Sequence[str],
    udf: type,
    udf_kwargs: dict[str, Any],
    *,
    concurrency: int,
    batch_size: int,
    address: str | None,
    num_cpus_per_actor: float,
) -> npt.NDArray[np.float32]:
    """Run ``udf`` over ``texts`` on ``concurrency`` Ray actors; the vectors, one row per text, in order."""
    if not texts:
        raise InputError("nothing to embed: no texts given")
    if concurrency < 1 or batch_size < 1:
        raise ConfigurationError(
            f"concurrency and batch_size must be >= 1, got concurrency={concurrency}, batch_size={batch_size}"
        )
    ray = ray_session(address)
    ds = ray.data.from_items([{"i": i, "text": t} for i, t in enumerate(texts)])
    out = ds.map_batches(
        udf,
        fn_constructor_kwargs=udf_kwargs,
        concurrency=concurrency,
        batch_size=batch_size,
        batch_format="numpy",
        num_cpus=num_cpus_per_actor,
    )
    positions: list[np.ndarray] = []
    vectors: list[np.ndarray] = []
    for batch in out.iter_batches(batch_format="numpy", batch_size=None):
        positions.append(np.asarray(batch["i"]))
        vectors.append(np.asarray(batch["vector"], dtype=np.float32))
    order = np.argsort(np.concatenate(positions), kind="stable")
    result = np.concatenate(vectors)[order]
    if result.shape[0] != len(texts):
        raise InputError(f"Ray returned {result.shape[0]} vectors for {len(texts)} texts")
    return result


def encoder_settings(encoder: Any) -> dict[str, Any]:
    """The constructor arguments that rebuild ``encoder`` (a :class:`SentenceEncoder`) on an actor."""
    return {
        "model": encoder.model_name,
        "query_prompt": encoder.query_prompt,
        "document_prompt": encoder.document_prompt,
        "query_prompt_name": encoder.query_prompt_name,
        "document_prompt_name": encoder.document_prompt_name,
        "batch_size": encoder.batch_size,
        "max_seq_length": encoder.max_seq_length,
        "device": encoder.device,
        "trust_remote_code": encoder.trust_remote_code,
    }


def embed_documents(
    documents: Sequence[Document],
    encoder: Any,
    *,
    concurrency: int = 2,
    batch_size: int = DEFAULT_BATCH_SIZE,
    address: str | None = None,
    num_cpus_per_actor: float = 1,
) -> npt.NDArray[np.float32]:
    """Document embeddings of ``encoder`` (a :class:`SentenceEncoder`) computed on Ray actors.

    Equal (``allclose``) to ``encoder.encode_documents(texts)``; the embedding cache is not used.
    """
    return map_texts(
        [d.text for d in documents],
        DocumentEmbedder,
        {"encoder": encoder_settings(encoder)},
        concurrency=concurrency,
        batch_size=batch_size,
        address=address,
        num_cpus_per_actor=num_cpus_per_actor,
    )


def index_dense(
    retriever: Any,
    documents: Sequence[Document],
    *,
    concurrency: int = 2,
    batch_size: int = DEFAULT_BATCH_SIZE,
    address: str | None = None,
    num_cpus_per_actor: float = 1,
) -> None:
    """Index ``documents`` in ``retriever`` (a :class:`DenseRetriever`), embedding them on Ray.

    The actors embed; the driver builds the FAISS index from the collected vectors
    (:meth:`DenseRetriever.index_vectors`), so searching is as after ``retriever.index(documents)``.
    """
    docs = list(documents)
    vectors = embed_documents(
        docs,
        retriever.encoder,
        concurrency=concurrency,
        batch_size=batch_size,
        address=address,
        num_cpus_per_actor=num_cpus_per_actor,
    )
    retriever.index_vectors(docs, vectors)


def extract_features(
    extractor: Any,
    pairs: Sequence[tuple[str, Document]],
    *,
    concurrency: int = 2,
    batch_size: int = DEFAULT_BATCH_SIZE,
    address: str | None = None,
    num_cpus_per_actor: float = 1,
) -> npt.NDArray[np.float32]:
    """``extractor.batch_features(pairs)`` with the embeddings computed on Ray actors.

    ``extractor`` is an :class:`~scopeguard.features.embeddings.EmbeddingFeatures` (the ``nli``
    detector's ``[u; v; |u-v|]``); each distinct text (document or question) is embedded once.
    """
    from scopeguard.features.embeddings import EmbeddingFeatures

    if not isinstance(extractor, EmbeddingFeatures):
        raise ConfigurationError(
            f"Ray feature extraction supports EmbeddingFeatures (the nli detector), "
            f"got {type(extractor).__name__}"
        )
    if not pairs:
        raise InputError("nothing to extract: no (question, document) pairs given")
    texts = list(dict.fromkeys([d.text for _, d in pairs] + [q for q, _ in pairs]))
    vectors = map_texts(
        texts,
        FeatureEmbedder,
        {"identity": extractor.identity, "batch_size": extractor.batch_size},
        concurrency=concurrency,
        batch_size=batch_size,
        address=address,
        num_cpus_per_actor=num_cpus_per_actor,
    )
    row = {t: i for i, t in enumerate(texts)}
    u = vectors[[row[d.text] for _, d in pairs]]
    v = vectors[[row[q] for q, _ in pairs]]
    return extractor.combine(u, v)
