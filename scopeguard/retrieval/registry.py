"""Retrievers by name: ``get_retriever("bm25")``, ``get_retriever("dense:/path/to/model")``.

Names (ELOQ section 4.3, Table 6; Huo et al.'s MS MARCO answer verification; offline stand-ins):

==============  ===============================================================================
bm25            rank-bm25 with Lucene's BM25 formula (k1=0.9, b=0.4 as in Pyserini); ``k1``/``b`` settable
bm25-msmarco    the same with k1=0.82, b=0.68 (:data:`BM25_MSMARCO`, tuned for MS MARCO passages)
bm25s           the same scores as ``bm25`` computed by bm25s (faster on large corpora)
sbert           sentence-transformers/all-mpnet-base-v2 (packaged copy offline)
minilm          sentence-transformers/all-MiniLM-L6-v2 (packaged copy offline; small and fast)
bge             BAAI/bge-large-en-v1.5 with its query instruction
stella          NovaSearch/stella_en_1.5B_v5 with its own ``s2p_query`` prompt for queries, none for documents
linq            Linq-AI-Research/Linq-Embed-Mistral with ``Instruct: {task}\\nQuery: {q}`` for queries
dense           ``model=`` a name above or any model (default :data:`DEFAULT_DENSE_MODEL`, MiniLM)
hybrid          reciprocal-rank fusion of ``bm25-msmarco`` and ``dense`` (``model=``, ``depth=100``,
                ``rrf_k=60``, ``weights=(1, 1)``)
neural          ``hybrid+rerank:monot5``: the paper's "Neural" stack, approximated (see below)
dense:X         any sentence-transformers hub name or local path X
FIRST+rerank:R  any name or spec above, its top ``candidates=100`` reranked by reranker spec R
                (``monot5``, ``cross-encoder``, ``monot5:NAME``, ``cross-encoder:NAME``, a bare NAME;
                see :mod:`scopeguard.retrieval.rerank`); ``batch_size``/``max_length``/``device``
                go to the reranker, other options to FIRST
==============  ===============================================================================

bge, stella and linq need the Hugging Face hub or a local copy (``model=/path`` or ``dense:/path``);
without either they raise :class:`~scopeguard.errors.ModelError` when they first embed. The same
holds for the rerankers' default models. The paper's neural stack pools SPLADE and ANCE and
reranks with MonoT5 then DuoT5 (Pyserini); ``neural`` pools BM25 and a dense model by RRF and
reranks with MonoT5 only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scopeguard.errors import ConfigurationError
from scopeguard.retrieval.base import Retriever

__all__ = [
    "BGE_QUERY_INSTRUCTION",
    "BM25_MSMARCO",
    "DEFAULT_DENSE_MODEL",
    "DEFAULT_RETRIEVER",
    "LINQ_DEFAULT_TASK",
    "RERANK_SEPARATOR",
    "available_retrievers",
    "get_retriever",
    "is_retriever_spec",
    "register_retriever",
]

BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
"""BGE v1.5's instruction for short queries retrieving passages (model card)."""

LINQ_DEFAULT_TASK = "Given a question, retrieve passages that answer the question"
"""The task text put into Linq-Embed-Mistral's ``Instruct: {task}\\nQuery: `` template."""

BM25_MSMARCO: dict[str, float] = {"k1": 0.82, "b": 0.68}
"""BM25 parameters tuned for MS MARCO passage ranking, as used by the answer-verification paper."""

DEFAULT_DENSE_MODEL = "minilm"
"""``dense``/``hybrid``'s model: the packaged all-MiniLM-L6-v2 (fast, offline)."""

DEFAULT_RETRIEVER = "minilm"
"""The retriever that stands in for the user's where scopeguard retrieves on its own (a query log
without the chunks it was answered from, ``eval-detector --retrieve``): MiniLM embeddings, as in
the integrations' examples."""

RERANK_SEPARATOR = "+rerank:"
"""Joins a first-stage spec and a reranker spec: ``bm25-msmarco+rerank:monot5``."""

_RERANKER_OPTIONS = frozenset({"batch_size", "max_length", "device", "trust_remote_code"})
_TWO_STAGE_OPTIONS = frozenset({"candidates", "show_progress"})


def _bm25(**kw: Any) -> Retriever:
    from scopeguard.retrieval.bm25 import BM25Retriever

    return BM25Retriever(**kw)


def _bm25s(**kw: Any) -> Retriever:
    from scopeguard.retrieval.bm25 import BM25sRetriever

    return BM25sRetriever(**kw)


def _dense(name: str, model: str, **defaults: Any) -> Callable[..., Retriever]:
    def make(**kw: Any) -> Retriever:
        from scopeguard.retrieval.dense import DenseRetriever

        options = {**defaults, **kw}
        return DenseRetriever(options.pop("model", model), name=options.pop("name", name), **options)

    return make


def _bm25_msmarco(**kw: Any) -> Retriever:
    return _bm25(**{**BM25_MSMARCO, **kw})


def _dense_model(model: str = DEFAULT_DENSE_MODEL, **kw: Any) -> Retriever:
    """A registered dense name (``minilm``, ``sbert``, ``bge``...) or any sentence-transformers model."""
    factory = _REGISTRY.get(model) if model in _DENSE_NAMES else None
    return factory(**kw) if factory is not None else _dense(f"dense:{model}", model)(**kw)


def _hybrid(
    model: str = DEFAULT_DENSE_MODEL,
    *,
    depth: int = 100,
    rrf_k: float = 60.0,
    weights: tuple[float, float] = (1.0, 1.0),
) -> Retriever:
    from scopeguard.retrieval.fusion import HybridRetriever

    return HybridRetriever(_bm25_msmarco(), _dense_model(model), depth=depth, rrf_k=rrf_k, weights=weights)


def _neural(**kw: Any) -> Retriever:
    return _two_stage("hybrid", "monot5", **kw)


def _two_stage(first: str, reranker: str, **kw: Any) -> Retriever:
    from scopeguard.retrieval.rerank import TwoStageRetriever, get_reranker

    rerank_kw = {key: kw.pop(key) for key in _RERANKER_OPTIONS & kw.keys()}
    stage_kw = {key: kw.pop(key) for key in _TWO_STAGE_OPTIONS & kw.keys()}
    return TwoStageRetriever(get_retriever(first, **kw), get_reranker(reranker, **rerank_kw), **stage_kw)


def _linq(**kw: Any) -> Retriever:
    task = kw.pop("task", LINQ_DEFAULT_TASK)
    return _dense("linq", "Linq-AI-Research/Linq-Embed-Mistral", query_prompt=f"Instruct: {task}\nQuery: ")(
        **kw
    )


_REGISTRY: dict[str, Callable[..., Retriever]] = {
    "bm25": _bm25,
    "bm25-msmarco": _bm25_msmarco,
    "bm25s": _bm25s,
    "sbert": _dense("sbert", "sentence-transformers/all-mpnet-base-v2"),
    "minilm": _dense("minilm", "sentence-transformers/all-MiniLM-L6-v2"),
    "bge": _dense("bge", "BAAI/bge-large-en-v1.5", query_prompt=BGE_QUERY_INSTRUCTION),
    "stella": _dense(
        "stella", "NovaSearch/stella_en_1.5B_v5", query_prompt_name="s2p_query", trust_remote_code=True
    ),
    "linq": _linq,
    "dense": _dense_model,
    "hybrid": _hybrid,
    "neural": _neural,
}
_DENSE_NAMES = frozenset({"sbert", "minilm", "bge", "stella", "linq"})


def available_retrievers() -> list[str]:
    """Registered names (``dense:NAME_OR_PATH`` and ``FIRST+rerank:RERANKER`` are accepted in addition)."""
    return sorted(_REGISTRY)


def is_retriever_spec(name: str) -> bool:
    """Whether :func:`get_retriever` knows ``name`` (checked without building anything)."""
    key = name.strip().partition(RERANK_SEPARATOR)[0].strip()
    return key.startswith("dense:") or key in _REGISTRY or key.lower() in _REGISTRY


def register_retriever(name: str, factory: Callable[..., Retriever]) -> None:
    """Register ``factory(**kwargs) -> Retriever`` under ``name`` (replacing an existing one)."""
    if not name or ":" in name or "+" in name:
        raise ConfigurationError(f"invalid retriever name {name!r} (must be non-empty, without ':' or '+')")
    _REGISTRY[name] = factory


def get_retriever(name: str, **kwargs: Any) -> Retriever:
    """A new retriever by registered name, ``dense:NAME_OR_PATH`` or ``FIRST+rerank:RERANKER``;
    ``kwargs`` go to its constructor."""
    if not isinstance(name, str):
        raise ConfigurationError(f"retriever name must be a string, got {type(name).__name__}")
    key = name.strip()
    if RERANK_SEPARATOR in key:
        first, _, reranker = key.partition(RERANK_SEPARATOR)
        if not first.strip() or not reranker.strip():
            raise ConfigurationError(f"retriever spec {name!r} must be FIRST{RERANK_SEPARATOR}RERANKER")
        return _two_stage(first.strip(), reranker.strip(), **kwargs)
    if key.startswith("dense:"):
        model = key[len("dense:") :].strip()
        if not model:
            raise ConfigurationError("'dense:' needs a sentence-transformers model name or path after it")
        return _dense(key, model)(**kwargs)
    factory = _REGISTRY.get(key) or _REGISTRY.get(key.lower())
    if factory is None:
        valid = ", ".join([*available_retrievers(), "dense:NAME_OR_PATH", f"FIRST{RERANK_SEPARATOR}RERANKER"])
        raise ConfigurationError(f"unknown retriever {name!r}; valid: {valid}")
    try:
        return factory(**kwargs)
    except TypeError as exc:
        raise ConfigurationError(f"bad options for retriever {name!r}: {exc}") from exc
