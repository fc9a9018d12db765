"""The records of a retrieval study: where each question's own document ranked, per retriever,
and the metrics of each group (:class:`StudyResult`, with its JSON form).

:mod:`scopeguard.retrieval.study` computes them (and publishes them);
:mod:`scopeguard.retrieval.report` writes them as tables, JSON and a plot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scopeguard.retrieval.metrics import GroupMetrics

__all__ = ["RankedQuestion", "RetrieverResult", "StudyResult"]


@dataclass(frozen=True)
class RankedQuestion:
    """Where one question's own document landed in one retriever's ranking."""

    question_id: str
    doc_id: str
    label: str
    topic: str
    rank: int | None
    missing: bool = False
    top_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetrieverResult:
    """One retriever's rankings, group metrics and Recall@k curves (k = 1..max k)."""

    name: str
    rankings: tuple[RankedQuestion, ...]
    groups: dict[str, GroupMetrics]
    curves: dict[str, list[float]]
    index_seconds: float
    query_seconds: float


@dataclass(frozen=True)
class StudyResult:
    ks: tuple[int, ...]
    depth: int
    n_documents: int
    n_questions: int
    missing_doc_ids: tuple[str, ...]
    retrievers: dict[str, RetrieverResult] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """``{retriever: {"in_scope": {...}, "out_of_scope": {...}, "all": {...}, "topics": {...}}}``."""
        return {name: _retriever_json(r) for name, r in self.retrievers.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "ks": list(self.ks),
            "depth": self.depth,
            "n_documents": self.n_documents,
            "n_questions": self.n_questions,
            "missing_doc_ids": list(self.missing_doc_ids),
            "retrievers": self.summary(),
        }


def _group_json(g: GroupMetrics) -> dict[str, Any]:
    out: dict[str, Any] = {m: e.value for m, e in g.metrics.items()}
    out["n"] = g.n
    out["n_missing"] = g.n_missing
    out["ci"] = {m: [e.low, e.high] for m, e in g.metrics.items()}
    out["confidence"] = g.confidence
    return out


def _retriever_json(r: RetrieverResult) -> dict[str, Any]:
    out: dict[str, Any] = {g: _group_json(r.groups[g]) for g in ("in_scope", "out_of_scope", "all")}
    topics: dict[str, dict[str, Any]] = {}
    for key, g in r.groups.items():
        if key.startswith("topic:"):
            topic, _, label = key[len("topic:") :].partition("/")
            topics.setdefault(topic, {})[label or "all"] = _group_json(g)
    out["topics"] = topics
    out["index_seconds"] = r.index_seconds
    out["query_seconds"] = r.query_seconds
    return out
