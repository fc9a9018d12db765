"""Inter-annotator agreement (Cohen's kappa), generator accuracy, and resolved labels.

Mirrors ELOQ's human verification (Table 3): two annotators per question, a third (the
*resolver*) settles disagreements. A question's resolved label is the resolver's label when
there is one, else the annotators' shared label when all who gave an in/out label agree;
otherwise it is listed as a disagreement to resolve. ``unsure`` never counts as a label for
resolution, but it is a category for kappa.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from scopeguard.data import Dataset, LabeledQuestion, load_dataset, read_jsonl, save_dataset
from scopeguard.errors import InputError
from scopeguard.review.store import reviews_dir

__all__ = [
    "AgreementReport",
    "PairAgreement",
    "agreement_report",
    "cohen_kappa",
    "export_resolved",
    "read_annotations",
]

_DECISIVE = ("in_scope", "out_of_scope")


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Cohen's kappa of two equally long label sequences; 1.0 when both are constant and equal."""
    if len(a) != len(b):
        raise InputError("kappa needs two label sequences of the same length")
    n = len(a)
    if n == 0:
        return float("nan")
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if expected == 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)


def read_annotations(dataset_dir: str | Path) -> dict[str, dict[str, str]]:
    """``{annotator: {question_id: scope_label}}`` from ``DIR/reviews/*.jsonl``."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(reviews_dir(dataset_dir).glob("*.jsonl")):
        labels = {str(r["question_id"]): r["scope"] for r in read_jsonl(path) if r.get("scope")}
        out[path.stem] = labels
    return out


class PairAgreement(BaseModel):
    model_config = ConfigDict(frozen=True)
    a: str
    b: str
    n: int
    kappa: float
    observed_agreement: float


class AgreementReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    annotators: tuple[str, ...]
    resolver: str | None
    pairs: tuple[PairAgreement, ...]
    generator_accuracy: dict[str, float]
    """Accuracy of the generator's labels against each annotator and against ``resolved``."""
    n_resolved: int
    resolved: dict[str, str]
    disagreements: tuple[dict[str, object], ...]


def agreement_report(dataset_dir: str | Path, *, resolver: str | None = None) -> AgreementReport:
    """Compute kappa per annotator pair, generator accuracy, resolved labels and open disagreements."""
    dataset = load_dataset(dataset_dir)
    annotations = read_annotations(dataset_dir)
    if resolver is not None and resolver not in annotations:
        raise InputError(f"no labels from resolver {resolver!r} in {reviews_dir(dataset_dir)}")
    resolver_labels = annotations.pop(resolver, {}) if resolver else {}
    if not annotations:
        raise InputError(f"no annotator label files in {reviews_dir(dataset_dir)}")
    names = tuple(sorted(annotations))
    generator = {q.id: q.label for q in dataset.questions}

    pairs = []
    for a, b in itertools.combinations(names, 2):
        common = sorted(set(annotations[a]) & set(annotations[b]))
        la, lb = [annotations[a][q] for q in common], [annotations[b][q] for q in common]
        observed = sum(x == y for x, y in zip(la, lb, strict=True)) / len(common) if common else float("nan")
        pairs.append(
            PairAgreement(a=a, b=b, n=len(common), kappa=cohen_kappa(la, lb), observed_agreement=observed)
        )

    resolved: dict[str, str] = {}
    disagreements: list[dict[str, object]] = []
    for q in dataset.questions:
        given = {n: annotations[n][q.id] for n in names if q.id in annotations[n]}
        decisive = {v for v in given.values() if v in _DECISIVE}
        if resolver_labels.get(q.id) in _DECISIVE:
            resolved[q.id] = resolver_labels[q.id]
        elif len(decisive) == 1 and all(v in _DECISIVE for v in given.values()):
            resolved[q.id] = decisive.pop()
        elif given:
            disagreements.append({"question_id": q.id, "question": q.question, "labels": given})

    def accuracy(labels: dict[str, str]) -> float:
        decided = [qid for qid, v in labels.items() if v in _DECISIVE and qid in generator]
        return sum(generator[q] == labels[q] for q in decided) / len(decided) if decided else float("nan")

    acc = {n: accuracy(annotations[n]) for n in names}
    acc["resolved"] = accuracy(resolved)
    return AgreementReport(
        annotators=names,
        resolver=resolver,
        pairs=tuple(pairs),
        generator_accuracy=acc,
        n_resolved=len(resolved),
        resolved=resolved,
        disagreements=tuple(disagreements),
    )


def export_resolved(dataset_dir: str | Path, out_dir: str | Path, report: AgreementReport) -> Dataset:
    """Write the resolved questions in the canonical format (generator label kept as metadata)."""
    dataset = load_dataset(dataset_dir)
    questions = tuple(
        LabeledQuestion(
            id=q.id,
            doc_id=q.doc_id,
            question=q.question,
            label=report.resolved[q.id],  # type: ignore[arg-type]
            metadata={**q.metadata, "generator_label": q.label},
        )
        for q in dataset.questions
        if q.id in report.resolved
    )
    if not questions:
        raise InputError("no resolved labels to export yet")
    used = {q.doc_id for q in questions}
    out = Dataset(documents={k: v for k, v in dataset.documents.items() if k in used}, questions=questions)
    save_dataset(out, out_dir)
    return out
