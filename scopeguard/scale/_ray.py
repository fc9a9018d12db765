"""Ray Data for the corpus-scale embedding work: one class-based UDF per model, vectors back in order.

Texts go into a Ray dataset with their position (``ray.data.from_items``), ``map_batches`` runs a
class-based UDF on ``concurrency`` actors (each loads its model once, in its constructor), and the
driver collects the vectors and puts them back in input order (:func:`map_texts`, shared by the
feature extraction of :mod:`scopeguard.scale._features`). The UDFs call the single-process code
(:class:`~scopeguard.retrieval.dense.SentenceEncoder`), so the results equal it up to float
rounding of different batch shapes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from scopeguard._optional import require
from scopeguard.errors import ConfigurationError, InputError, ModelError
from scopeguard.types import Document

__all__ = ["embed_documents", "index_dense", "map_texts", "ray_session", "require_ray"]

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


def map_texts(
    texts: Sequence[str],
    udf: type,
    udf_kwargs: dict[str, Any],
    *,
    concurrency: int,
    batch_size: int,
    address: str | None,
    num_cpus_per_actor: float,
    n_out: int | None = None,
) -> npt.NDArray[np.float32]:
    """Run ``udf`` over ``texts`` on ``concurrency`` Ray actors; its output rows ordered by ``i``.

    The UDF gets batches ``{"i": position, "text": text}`` and returns ``{"i": row, "vector": row
    values}``; by default one row per text (``i`` = the text's position), else ``n_out`` rows in
    all (a text may stand for a group of items). An actor that cannot start (its constructor
    raised, e.g. a model path missing on that node) is a :class:`ModelError` naming the reason.
    """
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
    try:
        for batch in out.iter_batches(batch_format="numpy", batch_size=None):
            positions.append(np.asarray(batch["i"]))
            vectors.append(np.asarray(batch["vector"], dtype=np.float32))
    except ray.exceptions.RayActorError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = re.sub(r"^[\w.]*Error: ", "", lines[-1]) if lines else type(exc).__name__
        raise ModelError(f"a Ray worker could not start {udf.__name__}: {reason}") from None
    expected = len(texts) if n_out is None else n_out
    if not vectors:
        raise InputError(f"Ray returned no vectors for {expected} rows")
    order = np.argsort(np.concatenate(positions), kind="stable")
    result = np.concatenate(vectors)[order]
    if result.shape[0] != expected:
        raise InputError(f"Ray returned {result.shape[0]} vectors for {expected} rows")
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
