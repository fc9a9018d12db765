"""Scale-out on Ray: corpus-scale embedding, feature extraction and document-parallel generation.

Needs the ``[ray]`` extra (``pip install "scopeguard[ray]"``); nothing here is imported by the
single-machine path. Each function takes ``address``: ``None`` starts a local Ray on first use (or
uses the one already initialised, e.g. ``ray.init(num_cpus=2)``), ``"auto"`` joins the cluster of
this machine, ``"ray://HEAD:10001"`` a remote one.

>>> from scopeguard.scale import index_dense, extract_features, extract_fast_features, generate_sharded
>>> index_dense(DenseRetriever("minilm"), documents, concurrency=4)      # actors embed, driver builds FAISS
>>> X = extract_features(EmbeddingFeatures(embedding_model="minilm"), pairs, concurrency=4)
>>> X = extract_features(HiddenStateFeatures(llm="qwen2.5-coder-0.5b"), pairs, concurrency=4)  # probe
>>> F = extract_fast_features([(question, [doc1, doc2]), ...], concurrency=4)  # coverage, alignment
>>> generate_sharded("openai:gpt-4o-mini", "corpus.jsonl", "out/", shards=8, concurrency=32)

Results equal the single-process ones: embeddings ``allclose`` to
:meth:`SentenceEncoder.encode_documents` and :meth:`EmbeddingFeatures.batch_features`, the probe's
hidden states to :meth:`HiddenStateFeatures.batch_features`, the fast features to
:meth:`FastFeaturizer.features`, and a sharded generation folder holds the same questions as
:meth:`Generator.run` on the whole corpus. The probe and fast features are cached with the driver
(only the misses go to Ray), in the caches that training reads.
"""

from __future__ import annotations

from scopeguard.scale._features import extract_fast_features, extract_features
from scopeguard.scale._generation import ShardedRunSummary, generate_sharded
from scopeguard.scale._ray import embed_documents, index_dense, ray_session

__all__ = [
    "ShardedRunSummary",
    "embed_documents",
    "extract_fast_features",
    "extract_features",
    "generate_sharded",
    "index_dense",
    "ray_session",
]
