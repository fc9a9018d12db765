"""Rerankers and the two-stage retriever (a first stage, then the top ``candidates`` reranked).

Huo, Arabzadeh & Clarke's "Neural" stack retrieves a candidate pool and reranks it with MonoT5
(then DuoT5). Two reranker kinds load any Hugging Face name or local folder with transformers:

- :class:`CrossEncoderReranker`: a sequence-classification model over ``(query, passage)`` pairs
  (``cross-encoder/ms-marco-MiniLM-L-6-v2`` and the other sentence-transformers cross-encoders);
  one label scores its logit, two labels the log-probability of label 1 ("relevant").
- :class:`MonoT5Reranker`: a T5 model prompted ``Query: q Document: d Relevant:`` and scored by
  the log-probability of ``true`` against ``false`` at the first decoded position
  (Nogueira et al., 2020; ``castorini/monot5-base-msmarco-10k``).

:func:`get_reranker` builds one from a spec: ``monot5``, ``cross-encoder`` (the default models),
``monot5:NAME_OR_PATH``, ``cross-encoder:NAME_OR_PATH``, or a bare name (MonoT5 when it contains
``t5``, else a cross-encoder). In the retriever registry, ``FIRST+rerank:SPEC`` builds a
:class:`TwoStageRetriever`, for example ``bm25-msmarco+rerank:monot5``. Ties keep the first
stage's order. torch and transformers load on first use (``pip install "scopeguard[rerank]"``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from scopeguard._optional import require
from scopeguard._progress import progress_bar
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.retrieval._ranking import check_k, hits_from_scores
from scopeguard.retrieval.base import Hit, Retriever
from scopeguard.types import Document

__all__ = [
    "DEFAULT_CROSS_ENCODER",
    "DEFAULT_MONOT5",
    "CrossEncoderReranker",
    "MonoT5Reranker",
    "Reranker",
    "TwoStageRetriever",
    "available_rerankers",
    "get_reranker",
]

logger = logging.getLogger(__name__)

DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"
"""The ``cross-encoder`` spec's model (MS MARCO passage ranking)."""

DEFAULT_MONOT5 = "castorini/monot5-base-msmarco-10k"
"""The ``monot5`` spec's model (the paper's reranker family, via Pyserini)."""


@runtime_checkable
class Reranker(Protocol):
    """Scores passages for a query; higher is more relevant."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class _TransformersReranker:
    """Shared plumbing: lazy loading by name or path, device, batching, truncation."""

    _auto_class = ""
    kind = ""

    def __init__(
        self,
        model: str | Path,
        *,
        batch_size: int = 16,
        max_length: int = 512,
        device: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        if not str(model).strip():
            raise ConfigurationError(f"{self.kind} reranker: model must be a non-empty name or path")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        if max_length < 8:
            raise ConfigurationError(f"max_length must be >= 8, got {max_length}")
        self.model_name = str(model)
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.trust_remote_code = trust_remote_code
        self._loaded: tuple[Any, Any, Any] | None = None  # torch, tokenizer, model

    @property
    def name(self) -> str:
        return self.model_name

    def _load(self) -> tuple[Any, Any, Any]:
        if self._loaded is None:
            feature = f"{self.kind} reranking"
            torch = require("torch", extra="rerank", feature=feature)
            tf = require("transformers", extra="rerank", feature=feature)
            from scopeguard.models import _load_failure, _quiet_weight_loading

            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            try:
                with _quiet_weight_loading():
                    tokenizer = tf.AutoTokenizer.from_pretrained(
                        self.model_name, trust_remote_code=self.trust_remote_code
                    )
                    model = getattr(tf, self._auto_class).from_pretrained(
                        self.model_name, trust_remote_code=self.trust_remote_code
                    )
            except Exception as exc:
                why = _load_failure(self.model_name, exc)
                raise ModelError(f"cannot load {self.kind} reranker {self.model_name!r}: {why}") from exc
            model.to(device).eval()
            self._check(tokenizer, model)
            self.device = device
            self._loaded = (torch, tokenizer, model)
            logger.info("%s reranker %s loaded on %s", self.kind, self.model_name, device)
        return self._loaded

    def _check(self, tokenizer: Any, model: Any) -> None:
        """Validate the loaded model for this kind (raise :class:`ModelError`)."""

    def _batch_scores(
        self, torch: Any, tokenizer: Any, model: Any, query: str, texts: list[str]
    ) -> list[float]:
        raise NotImplementedError

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in ``batch_size`` forward passes."""
        texts = list(texts)
        if not texts:
            return []
        torch, tokenizer, model = self._load()
        scores: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = texts[start : start + self.batch_size]
                scores.extend(self._batch_scores(torch, tokenizer, model, query, batch))
        return scores


class CrossEncoderReranker(_TransformersReranker):
    """A cross-encoder (sequence classification over ``query [SEP] passage``) by name or path."""

    _auto_class = "AutoModelForSequenceClassification"
    kind = "cross-encoder"

    def _check(self, tokenizer: Any, model: Any) -> None:
        labels = int(model.config.num_labels)
        if labels not in (1, 2):
            raise ModelError(
                f"{self.model_name!r} has {labels} labels; a cross-encoder reranker needs 1 (a relevance "
                "logit) or 2 (not relevant, relevant)"
            )

    def _batch_scores(
        self, torch: Any, tokenizer: Any, model: Any, query: str, texts: list[str]
    ) -> list[float]:
        enc = tokenizer(
            [query] * len(texts),
            texts,
            padding=True,
            truncation="only_second",
            max_length=self.max_length,
            return_tensors="pt",
        ).to(model.device)
        logits = model(**enc).logits.float()
        scores = logits[:, 0] if logits.shape[-1] == 1 else torch.log_softmax(logits, dim=-1)[:, 1]
        return [float(s) for s in scores.cpu()]


class MonoT5Reranker(_TransformersReranker):
    """MonoT5: log P(``true``) against ``false`` after ``Query: q Document: d Relevant:``."""

    _auto_class = "AutoModelForSeq2SeqLM"
    kind = "monot5"
    template = "Query: {query} Document: {document} Relevant:"
    true_word = "true"
    false_word = "false"

    def _token(self, tokenizer: Any, word: str) -> int:
        ids = tokenizer.encode(word, add_special_tokens=False)
        if len(ids) != 1:
            raise ModelError(
                f"{self.model_name!r}: the tokenizer has no single token for {word!r} (MonoT5 needs one)"
            )
        return int(ids[0])

    def _check(self, tokenizer: Any, model: Any) -> None:
        self._ids = [self._token(tokenizer, self.false_word), self._token(tokenizer, self.true_word)]
        start = model.config.decoder_start_token_id
        self._start = int(start if start is not None else model.config.pad_token_id or 0)

    def _batch_scores(
        self, torch: Any, tokenizer: Any, model: Any, query: str, texts: list[str]
    ) -> list[float]:
        prompts = [self.template.format(query=query, document=t) for t in texts]
        enc = tokenizer(
            prompts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(model.device)
        start = torch.full((len(prompts), 1), self._start, dtype=torch.long, device=model.device)
        logits = model(**enc, decoder_input_ids=start).logits[:, 0, self._ids].float()
        return [float(s) for s in torch.log_softmax(logits, dim=-1)[:, 1].cpu()]


_KINDS: dict[str, tuple[Callable[..., Reranker], str]] = {
    "cross-encoder": (CrossEncoderReranker, DEFAULT_CROSS_ENCODER),
    "monot5": (MonoT5Reranker, DEFAULT_MONOT5),
}


def available_rerankers() -> list[str]:
    """Reranker kinds; each also takes ``KIND:NAME_OR_PATH``."""
    return sorted(_KINDS)


def get_reranker(spec: str, **kwargs: Any) -> Reranker:
    """A reranker from ``KIND``, ``KIND:NAME_OR_PATH`` or a bare ``NAME_OR_PATH`` (see the module doc)."""
    if not isinstance(spec, str) or not spec.strip():
        kinds = ", ".join(available_rerankers())
        raise ConfigurationError(f"a reranker spec is needed: {kinds}, KIND:NAME_OR_PATH or NAME_OR_PATH")
    spec = spec.strip()
    kind, sep, model = spec.partition(":")
    if kind in _KINDS and sep and not model.strip():
        raise ConfigurationError(f"reranker spec {spec!r} needs a model name or path after '{kind}:'")
    if kind not in _KINDS:  # a bare model name or path
        kind = "monot5" if "t5" in Path(spec).name.lower() else "cross-encoder"
        model = spec
    factory, default = _KINDS[kind]
    try:
        return factory(model.strip() or default, **kwargs)
    except TypeError as exc:
        raise ConfigurationError(f"bad options for reranker {spec!r}: {exc}") from exc


class TwoStageRetriever:
    """A first-stage retriever whose top ``candidates`` hits a reranker reorders (``Retriever``).

    Args:
        first: the first stage (indexed through :meth:`index`).
        reranker: scores each candidate passage against the query.
        candidates: first-stage hits reranked per query (at least ``k`` are fetched).
        show_progress: a bar over the queries of :meth:`search_batch` (``None``: on a terminal).
    """

    def __init__(
        self,
        first: Retriever,
        reranker: Reranker,
        *,
        candidates: int = 100,
        show_progress: bool | None = None,
    ) -> None:
        if candidates < 1:
            raise ConfigurationError(f"candidates must be >= 1, got {candidates}")
        self.first = first
        self.reranker = reranker
        self.candidates = candidates
        self.show_progress = show_progress

    @property
    def name(self) -> str:
        return f"{self.first.name}+rerank:{self.reranker.name}"

    def index(self, documents: Sequence[Document]) -> None:
        self.first.index(documents)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """The first stage's top ``max(candidates, k)`` per query, reranked, cut to ``k``."""
        k = check_k(k)
        queries = list(queries)
        pools = self.first.search_batch(queries, max(self.candidates, k))
        out: list[list[Hit]] = []
        pairs = zip(queries, pools, strict=True)
        for query, pool in progress_bar(pairs, desc="rerank", enabled=self.show_progress, total=len(queries)):
            docs = [h.document for h in pool]
            out.append(
                hits_from_scores(docs, self.reranker.score(query, [d.text for d in docs]), k) if docs else []
            )
        return out
