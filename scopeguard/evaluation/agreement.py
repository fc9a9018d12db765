"""AutoDefuseEval against people: the defusion judge's labels versus the review page's (ELOQ 3.4).

The review page (``scopeguard review``) stores each reviewer's ``defused`` label (``yes`` /
``no``) of a question's response in ``DATASET/reviews/<reviewer>.jsonl``; an evaluation run
stores the defusion judge's verdict of each response in its ``responses.jsonl``.
:func:`defusion_agreement` pairs them up and reports, as ELOQ's Table 3 does for defusion:

* per reviewer, the judge's accuracy (``Annotator Acc``) and Cohen's kappa against that reviewer;
* pooled over every (reviewer, response) label, the judge's accuracy and kappa;
* per reviewer pair, the people's own kappa and observed agreement;
* the **group agreement accuracy** (``Group's Agree Acc``): the judge's accuracy on the responses
  that at least two reviewers labelled and all of them labelled alike.

A reviewer's label is matched to the run record of the same question (and, with ``prompt``, that
prompt) whose response is the text the review page showed (the dataset's ``responses.jsonl`` or
the question's ``response`` metadata). When the page showed no text, the question must have one
judged response in the run. Labels that cannot be compared (no record, ambiguous records, an
errored step, an ``unknown`` judgement) are listed in ``skipped`` with the reason.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from scopeguard.data import load_dataset, read_jsonl
from scopeguard.errors import InputError
from scopeguard.evaluation.store import ResponseRecord, RunStore
from scopeguard.review.agreement import PairAgreement, cohen_kappa
from scopeguard.review.server import load_items
from scopeguard.review.store import reviews_dir

__all__ = ["DefusionAgreementReport", "ReviewerAgreement", "SkippedLabel", "defusion_agreement"]

_YES_NO = ("yes", "no")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReviewerAgreement(_Frozen):
    """The judge against one reviewer (``n`` compared responses)."""

    reviewer: str
    n: int
    judge_accuracy: float
    judge_kappa: float


class SkippedLabel(_Frozen):
    """A human label that could not be compared with a judge label, and why."""

    reviewer: str
    question_id: str
    reason: str


class DefusionAgreementReport(_Frozen):
    """AutoDefuseEval's agreement with the reviewers (rates in [0, 1]; NaN: nothing to compare)."""

    run: str
    reviews: str
    reviewers: tuple[str, ...]
    labels: int
    """Human ``defused`` labels read (one per reviewer and question)."""
    compared: int
    """Of those, the labels compared with a judge label."""
    judge_accuracy: float
    judge_kappa: float
    by_reviewer: tuple[ReviewerAgreement, ...]
    pairs: tuple[PairAgreement, ...]
    group_agreement_accuracy: float
    group_agreed: int
    """Responses labelled by at least two reviewers who all agree (the group accuracy's ``n``)."""
    skipped: tuple[SkippedLabel, ...] = ()

    primary_metric: str = "judge_accuracy"

    @property
    def metrics(self) -> dict[str, float]:
        return {
            "judge_accuracy": self.judge_accuracy,
            "judge_kappa": self.judge_kappa,
            "group_agreement_accuracy": self.group_agreement_accuracy,
        }


def _review_files(reviews: Path) -> tuple[list[Path], Path | None]:
    """The label files under ``reviews`` (a file, a reviews folder or a dataset folder) and the
    dataset folder they belong to (``None`` when it cannot be told)."""
    if reviews.is_file():
        return [reviews], reviews.parent.parent
    if (reviews / "questions.jsonl").is_file():
        return sorted(reviews_dir(reviews).glob("*.jsonl")), reviews
    return sorted(reviews.glob("*.jsonl")), reviews.parent


def _human_labels(files: Sequence[Path]) -> dict[str, dict[str, bool]]:
    """``{reviewer: {question_id: defused}}`` from review files (rows without a label skipped)."""
    out: dict[str, dict[str, bool]] = {}
    for path in files:
        labels = {
            str(row["question_id"]): row["defused"] == "yes"
            for row in read_jsonl(path)
            if row.get("defused") in _YES_NO and "question_id" in row
        }
        if labels:
            out[path.stem] = labels
    return out


def _shown_responses(dataset_dir: Path | None) -> dict[str, str]:
    """The response text the review page showed per question (empty when unknown)."""
    if dataset_dir is None or not (dataset_dir / "questions.jsonl").is_file():
        return {}
    items = load_items(load_dataset(dataset_dir), dataset_dir)
    return {str(i["id"]): str(i["response"]).strip() for i in items if isinstance(i["response"], str)}


def _judged(records: list[ResponseRecord], shown: str | None) -> bool | str:
    """The judge's label of the reviewed response, or the reason there is none."""
    if shown is not None:
        records = [r for r in records if (r.response or "").strip() == shown]
    if not records:
        return "the run has no response to this question" + (
            " with the text the reviewer saw" if shown is not None else ""
        )
    if any(r.error is not None for r in records):
        return "the run's step for this response failed"
    values = {None if r.defusion is None else r.defusion.value for r in records}
    if len(values) > 1:
        return f"{len(records)} judged responses match and their labels differ (pass a prompt)"
    value = values.pop()
    if value is None:
        return "the judge gave no verdict (unknown)"
    return value


def _accuracy(pairs: Sequence[tuple[bool, bool]]) -> float:
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else math.nan


def _kappa(pairs: Sequence[tuple[bool, bool]]) -> float:
    return cohen_kappa([str(a) for a, _ in pairs], [str(b) for _, b in pairs]) if pairs else math.nan


def defusion_agreement(
    run: str | os.PathLike[str],
    reviews: str | os.PathLike[str] | None = None,
    *,
    prompt: str | None = None,
) -> DefusionAgreementReport:
    """Compare the defusion judge of the evaluation ``run`` with the reviewers' ``defused`` labels.

    ``reviews`` is one reviewer's label file, a ``reviews`` folder or the dataset folder; by
    default ``RUN/reviews`` when it exists, else the run's dataset's ``reviews`` folder.
    ``prompt`` compares only the responses of that RAG prompt.
    """
    store = RunStore(run)
    config = store.read_config()
    if reviews is None:
        local = Path(run) / "reviews"
        reviews = local if local.is_dir() else reviews_dir(config.dataset)
    files, dataset_dir = _review_files(Path(reviews))
    humans = _human_labels(files)
    if not humans:
        raise InputError(f"no 'defused' labels in {reviews}: label responses with `scopeguard review` first")
    shown = _shown_responses(dataset_dir)
    by_question: dict[str, list[ResponseRecord]] = {}
    for record in store.responses().values():
        if prompt is None or record.prompt == prompt:
            by_question.setdefault(record.question_id, []).append(record)

    compared: dict[str, list[tuple[bool, bool]]] = {}
    judge_of: dict[str, bool] = {}
    skipped: list[SkippedLabel] = []
    for reviewer, labels in sorted(humans.items()):
        for qid, human in sorted(labels.items()):
            judged = _judged(by_question.get(qid, []), shown.get(qid))
            if isinstance(judged, str):
                skipped.append(SkippedLabel(reviewer=reviewer, question_id=qid, reason=judged))
                continue
            judge_of[qid] = judged
            compared.setdefault(reviewer, []).append((judged, human))

    names = tuple(sorted(humans))
    pooled = [pair for reviewer in names for pair in compared.get(reviewer, [])]
    pairs = []
    for a, b in itertools.combinations(names, 2):
        common = sorted(set(humans[a]) & set(humans[b]))
        both = [(humans[a][q], humans[b][q]) for q in common]
        pairs.append(
            PairAgreement(a=a, b=b, n=len(common), kappa=_kappa(both), observed_agreement=_accuracy(both))
        )
    group = []
    for qid, judged in judge_of.items():
        given = {humans[r][qid] for r in names if qid in humans[r]}
        if sum(qid in humans[r] for r in names) >= 2 and len(given) == 1:
            group.append((judged, given.pop()))
    return DefusionAgreementReport(
        run=str(run),
        reviews=str(reviews),
        reviewers=names,
        labels=sum(len(v) for v in humans.values()),
        compared=len(pooled),
        judge_accuracy=_accuracy(pooled),
        judge_kappa=_kappa(pooled),
        by_reviewer=tuple(
            ReviewerAgreement(
                reviewer=r,
                n=len(compared.get(r, [])),
                judge_accuracy=_accuracy(compared.get(r, [])),
                judge_kappa=_kappa(compared.get(r, [])),
            )
            for r in names
        ),
        pairs=tuple(pairs),
        group_agreement_accuracy=_accuracy(group),
        group_agreed=len(group),
        skipped=tuple(skipped),
    )
