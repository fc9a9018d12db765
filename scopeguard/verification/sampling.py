"""Samples of a verification run for manual checking (Huo et al.'s Table 2: 100 per class).

:func:`sample_for_check` draws up to ``per_class`` results of each predicted class (Yes / No /
Not Related) with a seeded generator; the draw depends only on the results and the seed, not on
their order in the file. :func:`write_check_sample` writes them as JSONL or CSV (by suffix) with
an empty ``correct`` column for the checker, and :func:`check_summary` tallies a filled-in file
into the table (correct / incorrect per class).
"""

from __future__ import annotations

import csv
import json
import logging
import os
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from scopeguard.data import read_jsonl
from scopeguard.errors import ConfigurationError, DatasetError
from scopeguard.verification.loop import VerificationResult
from scopeguard.verification.parsing import VerificationLabel
from scopeguard.verification.report import PAPER_CLASS_NAMES

__all__ = ["CHECKED_CLASSES", "CheckItem", "check_summary", "sample_for_check", "write_check_sample"]

logger = logging.getLogger(__name__)

CHECKED_CLASSES: tuple[VerificationLabel, ...] = ("supported", "contradicted", "not_related")
"""The predicted classes the paper checked by hand (Yes, No, Not Related)."""


class CheckItem(BaseModel):
    """One result to check by hand; ``correct`` is left empty for the checker (true / false)."""

    model_config = ConfigDict(frozen=True)

    predicted: str
    verdict: VerificationLabel
    id: str
    question: str
    answer: str
    compared: str
    top_passage: str = ""
    rationale: str = ""
    correct: bool | None = None

    @classmethod
    def from_result(cls, result: VerificationResult) -> CheckItem:
        return cls(
            predicted=PAPER_CLASS_NAMES[result.verdict],
            verdict=result.verdict,
            id=result.id,
            question=result.question,
            answer=result.answer,
            compared=result.compared,
            top_passage=result.evidence[0].text if result.evidence else "",
            rationale=result.rationale,
        )


def sample_for_check(
    results: Iterable[VerificationResult],
    *,
    per_class: int = 100,
    seed: int = 0,
    classes: Sequence[VerificationLabel] = CHECKED_CLASSES,
) -> list[CheckItem]:
    """Up to ``per_class`` results of each class in ``classes`` drawn at random (``seed``), grouped by
    class in the order of ``classes``. A class with fewer results gives all of them (logged)."""
    if per_class < 1:
        raise ConfigurationError(f"per_class must be >= 1, got {per_class}")
    unknown = [c for c in classes if c not in PAPER_CLASS_NAMES]
    if unknown:
        raise ConfigurationError(f"unknown classes {unknown}; valid: {', '.join(PAPER_CLASS_NAMES)}")
    by_class: dict[str, list[VerificationResult]] = {c: [] for c in classes}
    for r in results:
        if r.verdict in by_class:
            by_class[r.verdict].append(r)
    rng = random.Random(seed)
    items: list[CheckItem] = []
    for c in classes:
        pool = sorted(by_class[c], key=lambda r: (r.id, r.question))
        if len(pool) < per_class:
            logger.warning("class %s has %d results, fewer than %d: taking all", c, len(pool), per_class)
        drawn = rng.sample(pool, min(per_class, len(pool)))
        items.extend(CheckItem.from_result(r) for r in sorted(drawn, key=lambda r: (r.id, r.question)))
    return items


def write_check_sample(items: Sequence[CheckItem], path: str | os.PathLike[str]) -> Path:
    """Write ``items`` to ``path``: CSV when it ends in ``.csv``, else JSONL. Returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = list(CheckItem.model_fields)
    if out.suffix.lower() == ".csv":
        with out.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            for item in items:
                row = item.model_dump()
                writer.writerow({**row, "correct": "" if item.correct is None else str(item.correct).lower()})
    else:
        with out.open("w", encoding="utf-8") as fh:
            for item in items:
                fh.write(json.dumps(item.model_dump(), ensure_ascii=False) + "\n")
    return out


def _read_items(path: Path) -> list[CheckItem]:
    if path.suffix.lower() == ".csv":
        with path.open(encoding="utf-8", newline="") as fh:
            rows = [
                (n, {**row, "correct": row.get("correct") or None})
                for n, row in enumerate(csv.DictReader(fh), 2)
            ]
    else:
        rows = list(enumerate(read_jsonl(path), 1))
    items: list[CheckItem] = []
    for line, row in rows:
        try:
            items.append(CheckItem.model_validate(row))
        except ValidationError as exc:
            raise DatasetError(
                f"not a check item: {exc.errors()[0]['msg']}", path=str(path), line=line
            ) from None
    return items


def check_summary(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """Table 2 from a filled-in sample: ``{predicted: {"correct", "incorrect", "unchecked"}}``."""
    table: dict[str, dict[str, int]] = {}
    for item in _read_items(Path(path)):
        row = table.setdefault(item.predicted, {"correct": 0, "incorrect": 0, "unchecked": 0})
        row["unchecked" if item.correct is None else "correct" if item.correct else "incorrect"] += 1
    return table
