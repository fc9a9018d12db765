"""Signals: what the read gives for each question of a dataset, extracted once and cached on disk.

For each labelled question: the read's verdict margin (log P(No) - log P(Yes), from a
:class:`~scopeguard.detection.read.reader.Reader`); with a reader whose scorer returns hidden
states (``layers=``), the hidden states at the verdict position from the same decode
(``hidden``); the margins of further verdict prompts read against the same document state
(``probes``, e.g. ``answerability_inference``: only their last tokens); and, for the ``fast``
head, the fast read's ``coverage`` and ``alignment``. Extraction is paid once: every value is
cached under ``$SCOPEGUARD_CACHE/features`` by (read identity, question, document content), so
a killed run resumes where it stopped and the folds of a cross-validation, the benchmarks and
``train-detector`` share the work. Questions are read in document order so that llama.cpp's
prefix cache reads each document once. :func:`signal_matrix` turns them into a head's columns.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scopeguard._progress import progress_bar
from scopeguard.data import Dataset
from scopeguard.detection.read.features import FeatureCache, stable_hash
from scopeguard.detection.read.reader import Reader
from scopeguard.errors import ConfigurationError
from scopeguard.prompts import template_source
from scopeguard.types import Document

__all__ = [
    "INFERENCE_TEMPLATE",
    "READ_FEATURES",
    "Signals",
    "extract_signals",
    "fast_feature_cache",
    "fast_feature_key",
    "read_identity",
    "sample_documents",
    "signal_matrix",
]

logger = logging.getLogger(__name__)

FAST_VERSION = 1
#: the second prompt a head may read against the same document state ("could a careful reader
#: answer it from what the document states or clearly implies?")
INFERENCE_TEMPLATE = "answerability_inference"
#: the reading signals a head may use: the verdict margin, the inference probe's margin, a hidden state
READ_FEATURES = ("margin", "inference_margin", "hidden")


@dataclass(frozen=True)
class Signals:
    """Per-question signals of one or more datasets (rows aligned with ``ids``)."""

    ids: tuple[str, ...]
    groups: tuple[str, ...]  # "<dataset>/<doc_id>": the unit of grouped cross-validation
    datasets: tuple[str, ...]
    labels: np.ndarray  # 1 = out of scope
    coverage: np.ndarray
    alignment: np.ndarray
    margin: np.ndarray  # NaN where the reading stage was not asked
    hidden: np.ndarray | None = None  # (n, layers, dim) at the verdict position, where read
    layers: tuple[int, ...] = ()  # the model layers of ``hidden``
    probes: dict[str, np.ndarray] = field(default_factory=dict)  # template -> margin

    def __len__(self) -> int:
        return len(self.ids)

    def column(self, name: str) -> np.ndarray:
        return np.asarray(getattr(self, name), dtype=np.float64)

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        return np.stack([self.column(n) for n in names], axis=1)

    def take(self, idx: np.ndarray) -> Signals:
        return Signals(
            ids=tuple(self.ids[i] for i in idx),
            groups=tuple(self.groups[i] for i in idx),
            datasets=tuple(self.datasets[i] for i in idx),
            labels=self.labels[idx],
            coverage=self.coverage[idx],
            alignment=self.alignment[idx],
            margin=self.margin[idx],
            hidden=None if self.hidden is None else self.hidden[idx],
            layers=self.layers,
            probes={k: v[idx] for k, v in self.probes.items()},
        )

    @staticmethod
    def concat(parts: Sequence[Signals]) -> Signals:
        return Signals(
            ids=tuple(i for p in parts for i in p.ids),
            groups=tuple(g for p in parts for g in p.groups),
            datasets=tuple(d for p in parts for d in p.datasets),
            labels=np.concatenate([p.labels for p in parts]),
            coverage=np.concatenate([p.coverage for p in parts]),
            alignment=np.concatenate([p.alignment for p in parts]),
            margin=np.concatenate([p.margin for p in parts]),
            hidden=(
                np.concatenate([p.hidden for p in parts])  # type: ignore[misc]
                if all(p.hidden is not None for p in parts) and len({p.layers for p in parts}) == 1
                else None
            ),
            layers=parts[0].layers if parts else (),
            probes={
                k: np.concatenate([p.probes[k] for p in parts])
                for k in (parts[0].probes if parts else {})
                if all(k in p.probes for p in parts)
            },
        )


def fast_feature_cache(
    encoder: str = "minilm", *, root: str | os.PathLike[str] | None = None
) -> FeatureCache:
    """The on-disk cache of the fast features (``coverage``, ``alignment``), one float32 pair per
    :func:`fast_feature_key`; shared by :func:`extract_signals` and
    :func:`scopeguard.scale.extract_fast_features`, so features computed on Ray are paid once."""
    return FeatureCache({"kind": "fast_signals", "encoder": encoder, "version": FAST_VERSION}, root=root)


def fast_feature_key(question: str, documents: Sequence[Document]) -> str:
    """The cache key of one question's fast features against ``documents`` (by content)."""
    return stable_hash(question, *(d.content_hash for d in documents))


def _template_sha256(name: str) -> str:
    """SHA-256 of a prompt template's source: cached verdicts change when the wording does."""
    import hashlib

    return hashlib.sha256(template_source(name).encode("utf-8")).hexdigest()


def extract_signals(
    dataset: Dataset,
    *,
    name: str = "",
    fast: bool = True,
    reader: object | None = None,
    probes: Sequence[str] = (),
    progress: bool | None = None,
) -> Signals:
    """Signals for every question of ``dataset``.

    ``fast``: compute the fast read's features. ``reader``: the
    :class:`~scopeguard.detection.read.reader.Reader` (or a reading detector's) whose margins to
    compute (``None``: margins are NaN), with the hidden states of its scorer's ``layers`` when it
    has any. ``probes``: further verdict templates read after the reader's, each against the same document
    state (their margins in ``Signals.probes``).
    """
    docs = dataset.documents
    order = sorted(range(len(dataset.questions)), key=lambda i: dataset.questions[i].doc_id)
    questions = [dataset.questions[i] for i in order]
    n = len(questions)
    coverage = np.full(n, np.nan)
    alignment = np.full(n, np.nan)
    margin = np.full(n, np.nan)
    label = name or "dataset"

    if fast:
        from scopeguard.detection.read.fast import FastFeaturizer

        cache = fast_feature_cache("minilm")
        featurizer: FastFeaturizer | None = None
        for i, q in enumerate(progress_bar(questions, desc=f"fast features {label}", enabled=progress)):
            doc = docs[q.doc_id]
            key = fast_feature_key(q.question, [doc])
            hit = cache.get(key)
            if hit is None:
                featurizer = featurizer or FastFeaturizer("minilm")
                values = featurizer.features(q.question, [doc])
                hit = np.array([values["coverage"], values["alignment"]], dtype=np.float32)
                cache.put(key, hit)
            coverage[i], alignment[i] = float(hit[0]), float(hit[1])

    hidden: np.ndarray | None = None
    layers: tuple[int, ...] = ()
    extra = {t: np.full(n, np.nan) for t in probes}
    if reader is not None:
        reader = getattr(reader, "reader", reader)  # a reading detector's own Reader
        if not isinstance(reader, Reader):
            raise TypeError(f"reader must be a Reader or a reading detector, not {type(reader).__name__}")
        layers = tuple(getattr(reader.scorer, "layers", ()) or ())
        templates = [reader.template, *[t for t in probes if t != reader.template]]
        margins = {t: FeatureCache(read_identity(reader, t)) for t in templates}
        states = [FeatureCache(read_identity(reader, templates[0], layer)) for layer in layers]
        for i, q in enumerate(progress_bar(questions, desc=f"verdicts {label}", enabled=progress)):
            doc = docs[q.doc_id]
            key = stable_hash(q.question, doc.content_hash)
            for j, template in enumerate(templates):
                hit = margins[template].get(key)
                cached = [c.get(key) for c in states] if j == 0 else []
                rows: list[np.ndarray] = [r for r in cached if r is not None]
                if hit is None or len(rows) < len(cached):
                    best, _ = reader.read(q.question, [doc], template=template)
                    hit = np.array([best.logp_yes, best.logp_no], dtype=np.float32)
                    margins[template].put(key, hit)
                    if cached:
                        assert best.hidden is not None  # a scorer with layers returns them
                        rows = [np.asarray(r, dtype=np.float32) for r in best.hidden]
                        for cache, row in zip(states, rows, strict=True):
                            cache.put(key, row)
                value = float(hit[1]) - float(hit[0])
                if j > 0:
                    extra[template][i] = value
                    continue
                margin[i] = value
                if rows:
                    if hidden is None:
                        hidden = np.zeros((n, len(layers), len(rows[0])), np.float32)
                    hidden[i] = np.stack(rows)

    return Signals(
        ids=tuple(q.id for q in questions),
        groups=tuple(f"{label}/{q.doc_id}" for q in questions),
        datasets=(label,) * n,
        labels=np.array([1 if q.label == "out_of_scope" else 0 for q in questions]),
        coverage=coverage,
        alignment=alignment,
        margin=margin,
        hidden=hidden,
        layers=layers,
        probes=extra,
    )


def read_identity(reader: Any, template: str, layer: int | None = None) -> dict[str, Any]:
    """What a cached read depends on: model, prompt wording, passage size and the KV cache's type;
    for a hidden state (one cache per layer, so a head reading any subset of the layers finds
    them), the layer."""
    identity: dict[str, Any] = {
        "kind": "verdict_margin" if layer is None else "verdict_hidden",
        "model": reader.scorer.name,
        "template": template,
        "template_sha256": _template_sha256(template),
        "chunk_tokens": reader.chunk_tokens,
    }
    if layer is not None:
        identity["layer"] = layer
    kv = getattr(reader.scorer, "kv_type", "f16")  # a quantised KV cache reads a little differently
    if kv != "f16":  # (f16 reads keep the keys they had before the type was a choice)
        identity["kv_type"] = kv
    return identity


def sample_documents(dataset: Dataset, max_docs: int | None, *, seed: int = 0) -> Dataset:
    """``dataset`` restricted to ``max_docs`` documents drawn at random (seeded), with all their questions."""
    if max_docs is None or max_docs >= len(dataset.documents):
        return dataset
    if max_docs < 1:
        raise ConfigurationError(f"max_docs must be >= 1, got {max_docs}")
    ids = sorted(dataset.documents)
    keep = {ids[i] for i in np.random.default_rng(seed).permutation(len(ids))[:max_docs]}
    return Dataset(
        documents={k: v for k, v in dataset.documents.items() if k in keep},
        questions=tuple(q for q in dataset.questions if q.doc_id in keep),
    )


def signal_matrix(signals: Any, names: Sequence[str], layer: int | None) -> tuple[np.ndarray, list[str]]:
    """The feature matrix of :class:`~scopeguard.detection.signals.Signals` for a head's ``names``."""
    cols: list[np.ndarray] = []
    columns: list[str] = []
    for name in names:
        if name == "margin":
            cols.append(signals.column("margin")[:, None])
            columns.append("margin")
        elif name == "inference_margin":
            if INFERENCE_TEMPLATE not in signals.probes:
                raise ConfigurationError("the signals hold no inference probe: extract with probes=...")
            cols.append(np.asarray(signals.probes[INFERENCE_TEMPLATE], dtype=np.float64)[:, None])
            columns.append("inference_margin")
        elif name == "hidden":
            if signals.hidden is None or layer not in signals.layers:
                raise ConfigurationError(f"the signals hold no hidden state of layer {layer}")
            h = np.asarray(signals.hidden[:, signals.layers.index(layer), :], dtype=np.float64)
            cols.append(h)
            columns.extend(f"h{layer}_{i}" for i in range(h.shape[1]))
        else:
            raise ConfigurationError(f"unknown signal {name!r}; valid: {', '.join(READ_FEATURES)}")
    return np.hstack(cols), columns
