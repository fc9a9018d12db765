"""The examples a reader is tuned on: (question, passage, label), drawn by document.

Each dataset's documents are split, seeded, into training and validation documents (a document's
questions all go one way: validation is grouped by document, like every other fit here). The
training questions are drawn class-balanced from each dataset's share of ``max_questions``, and
every example carries a loss weight so that each dataset weighs the same and, within it, the two
classes weigh the same, whatever their counts. Datasets given for evaluation only (``evaluate``)
are never trained on: their sampled questions are the left-out curves.

The passage is the document whole, as :class:`~scopeguard.detection.read.reader.Reader` asks a
document that fits its passage limit; a prompt longer than ``max_tokens`` is left out and counted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scopeguard.data import Dataset, LabeledQuestion, load_dataset
from scopeguard.errors import ConfigurationError, DatasetError
from scopeguard.prompts import render_documents

__all__ = ["Example", "ExampleSet", "build_examples"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Example:
    """One verdict prompt to learn: ``label`` 1 for out of scope (the reader should say No)."""

    dataset: str
    doc_id: str
    qid: str
    question: str
    passage: str
    label: int
    weight: float = 1.0


@dataclass
class ExampleSet:
    """The training examples, the validation examples by dataset, and what was left out."""

    train: list[Example]
    validation: dict[str, list[Example]]
    evaluation: dict[str, list[Example]]
    skipped: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for ex in self.train:
            row = out.setdefault(ex.dataset, {"train": 0, "train_out_of_scope": 0})
            row["train"] += 1
            row["train_out_of_scope"] += ex.label
        for kind, sets in (("validation", self.validation), ("evaluation", self.evaluation)):
            for name, items in sets.items():
                out.setdefault(name, {})[kind] = len(items)
        for name, n in self.skipped.items():
            out.setdefault(name, {})["skipped_too_long"] = n
        return out


def _split_docs(
    data: Dataset, fraction: float, most: int, rng: np.random.Generator, *, keep_one: bool = True
) -> set[str]:
    """Validation documents: drawn until they hold ``fraction`` of the questions (at most ``most``),
    leaving at least one document to train on when ``keep_one``."""
    if fraction <= 0 or most <= 0:
        return set()
    by_doc: dict[str, int] = {}
    for q in data.questions:
        by_doc[q.doc_id] = by_doc.get(q.doc_id, 0) + 1
    docs = sorted(by_doc)
    want = min(most, max(1, round(fraction * len(data.questions))))
    chosen: set[str] = set()
    n = 0
    for i in rng.permutation(len(docs)):
        if n >= want or (keep_one and len(chosen) >= len(docs) - 1):
            break
        chosen.add(docs[int(i)])
        n += by_doc[docs[int(i)]]
    return chosen


def _balanced(questions: list[LabeledQuestion], quota: int | None, rng: np.random.Generator) -> list[int]:
    """Indices of up to ``quota`` questions, half of each class where both have enough."""
    idx = {c: [i for i, q in enumerate(questions) if q.label == c] for c in ("in_scope", "out_of_scope")}
    for c in idx:
        idx[c] = [idx[c][int(j)] for j in rng.permutation(len(idx[c]))]
    if quota is None:
        return sorted(idx["in_scope"] + idx["out_of_scope"])
    half = quota // 2
    a, b = idx["in_scope"], idx["out_of_scope"]
    take_a = min(len(a), max(half, quota - len(b)))
    take_b = min(len(b), quota - take_a)
    return sorted(a[:take_a] + b[:take_b])


def build_examples(
    datasets: Sequence[str | os.PathLike[str]],
    *,
    count_tokens: Callable[[str, str], int],
    evaluate: Sequence[str | os.PathLike[str]] = (),
    max_questions: int | None = None,
    max_tokens: int = 768,
    val_fraction: float = 0.1,
    val_questions: int = 48,
    same_source: dict[str, str] | None = None,
    seed: int = 0,
) -> ExampleSet:
    """The examples of ``datasets`` (training and validation) and ``evaluate`` (see the module
    docstring). ``count_tokens(question, passage)``: the verdict prompt's length in tokens.
    ``same_source``: ``{"squad2-train-extra": "squad2-train"}`` weighs the two as one dataset."""
    same_source = same_source or {}
    names = [Path(d).name for d in datasets]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"two datasets share a folder name: {names}")
    sources = sorted({same_source.get(n, n) for n in names})
    quota = None if not max_questions else max(2, max_questions // len(names))
    skipped: dict[str, int] = {}

    def fits(e: Example) -> bool:
        if count_tokens(e.question, e.passage) <= max_tokens:
            return True
        skipped[e.dataset] = skipped.get(e.dataset, 0) + 1
        return False

    def make(name: str, data: Dataset, q: LabeledQuestion, passages: dict[str, str]) -> Example:
        passage = passages.setdefault(q.doc_id, render_documents([data.documents[q.doc_id]]))
        return Example(name, q.doc_id, q.id, q.question, passage, int(q.label == "out_of_scope"))

    train: list[Example] = []
    validation: dict[str, list[Example]] = {}
    for i, (folder, name) in enumerate(zip(datasets, names, strict=True)):
        data = load_dataset(folder)
        rng = np.random.default_rng([seed, i])
        held = _split_docs(data, val_fraction, val_questions, rng)
        passages: dict[str, str] = {}
        val = (make(name, data, q, passages) for q in data.questions if q.doc_id in held)
        validation[name] = [e for e in val if fits(e)]
        pool = [q for q in data.questions if q.doc_id not in held]
        kept = [
            e for e in (make(name, data, pool[j], passages) for j in _balanced(pool, quota, rng)) if fits(e)
        ]
        if not kept:
            raise DatasetError(
                f"no training question of {name} fits max_tokens={max_tokens}", path=str(folder)
            )
        train.extend(kept)
    evaluation: dict[str, list[Example]] = {}
    for j, folder in enumerate(evaluate):
        name = Path(folder).name
        data = load_dataset(folder)
        rng = np.random.default_rng([seed, 1000 + j])
        held = _split_docs(data, 1.0, val_questions, rng, keep_one=False)
        passages = {}
        evaluation[name] = [
            e for e in (make(name, data, q, passages) for q in data.questions if q.doc_id in held) if fits(e)
        ]
    # each source weighs the same, and within it each class
    groups: dict[tuple[str, int], int] = {}
    for ex in train:
        key = (same_source.get(ex.dataset, ex.dataset), ex.label)
        groups[key] = groups.get(key, 0) + 1
    raw = [1.0 / groups[(same_source.get(e.dataset, e.dataset), e.label)] for e in train]
    scale = len(raw) / sum(raw)
    train = [Example(**{**e.__dict__, "weight": w * scale}) for e, w in zip(train, raw, strict=True)]
    logger.info(
        "%d training examples from %d sources (%s), %d validation, %d evaluation; %d too long",
        len(train),
        len(sources),
        ", ".join(sources),
        sum(map(len, validation.values())),
        sum(map(len, evaluation.values())),
        sum(skipped.values()),
    )
    return ExampleSet(train=train, validation=validation, evaluation=evaluation, skipped=skipped)
