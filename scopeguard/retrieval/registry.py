"""Retrievers by name: ``get_retriever("bm25")``, ``get_retriever("dense:/path/to/model")``.

Names (ELOQ section 4.3, Table 6, plus offline stand-ins):

========  =====================================================================================
bm25      rank-bm25 with Lucene's BM25 formula (k1=0.9, b=0.4 as in Pyserini); ``k1``/``b`` settable
bm25s     the same scores computed by bm25s (faster on large corpora)
sbert     sentence-transformers/all-mpnet-base-v2 (packaged copy offline)
minilm    sentence-transformers/all-MiniLM-L6-v2 (packaged copy offline; small and fast)
bge       BAAI/bge-large-en-v1.5 with its query instruction
stella    NovaSearch/stella_en_1.5B_v5 with its own ``s2p_query`` prompt for queries, none for documents
linq      Linq-AI-Research/Linq-Embed-Mistral with ``Instruct: {task}\\nQuery: {q}`` for queries
dense:X   any sentence-transformers hub name or local path X
========  =====================================================================================

bge, stella and linq need the Hugging Face hub or a local copy (``model=/path`` or ``dense:/path``);
without either they raise :class:`~scopeguard.errors.ModelError` when they first embed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scopeguard.errors import ConfigurationError
from scopeguard.retrieval.base import Retriever

__all__ = [
    "BGE_QUERY_INSTRUCTION",
    "LINQ_DEFAULT_TASK",
    "available_retrievers",
    "get_retriever",
    "register_retriever",
]

BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
"""BGE v1.5's instruction for short queries retrieving passages (model card)."""

LINQ_DEFAULT_TASK = "Given a question, retrieve passages that answer the question"
"""The task text put into Linq-Embed-Mistral's ``Instruct: {task}\\nQuery: `` template."""


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


def _linq(**kw: Any) -> Retriever:
    task = kw.pop("task", LINQ_DEFAULT_TASK)
    return _dense("linq", "Linq-AI-Research/Linq-Embed-Mistral", query_prompt=f"Instruct: {task}\nQuery: ")(
        **kw
    )


_REGISTRY: dict[str, Callable[..., Retriever]] = {
    "bm25": _bm25,
    "bm25s": _bm25s,
    "sbert": _dense("sbert", "sentence-transformers/all-mpnet-base-v2"),
    "minilm": _dense("minilm", "sentence-transformers/all-MiniLM-L6-v2"),
    "bge": _dense("bge", "BAAI/bge-large-en-v1.5", query_prompt=BGE_QUERY_INSTRUCTION),
    "stella": _dense(
        "stella", "NovaSearch/stella_en_1.5B_v5", query_prompt_name="s2p_query", trust_remote_code=True
    ),
    "linq": _linq,
}


def available_retrievers() -> list[str]:
    """Registered names (``dense:NAME_OR_PATH`` is accepted in addition)."""
    return sorted(_REGISTRY)


def register_retriever(name: str, factory: Callable[..., Retriever]) -> None:
    """Register ``factory(**kwargs) -> Retriever`` under ``name`` (replacing an existing one)."""
    if not name or ":" in name:
        raise ConfigurationError(f"invalid retriever name {name!r} (must be non-empty, without ':')")
    _REGISTRY[name] = factory


def get_retriever(name: str, **kwargs: Any) -> Retriever:
    """A new retriever by registered name or ``dense:NAME_OR_PATH``; ``kwargs`` go to its constructor."""
    if not isinstance(name, str):
        raise ConfigurationError(f"retriever name must be a string, got {type(name).__name__}")
    key = name.strip()
    if key.startswith("dense:"):
        model = key[len("dense:") :].strip()
        if not model:
            raise ConfigurationError("'dense:' needs a sentence-transformers model name or path after it")
        return _dense(key, model)(**kwargs)
    factory = _REGISTRY.get(key) or _REGISTRY.get(key.lower())
    if factory is None:
        valid = ", ".join([*available_retrievers(), "dense:NAME_OR_PATH"])
        raise ConfigurationError(f"unknown retriever {name!r}; valid: {valid}")
    try:
        return factory(**kwargs)
    except TypeError as exc:
        raise ConfigurationError(f"bad options for retriever {name!r}: {exc}") from exc
