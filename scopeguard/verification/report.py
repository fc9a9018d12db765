"""Reports on verification runs: the class distribution (the paper's Table 1) and agreement
matrices between two runs (Tables 3-4: two retrievers, or with and without the reader).

A run is a ``results.jsonl`` of :class:`~scopeguard.verification.VerificationResult` rows;
runs are matched by question id. Metrics come back as ``dict[str, float]``; the agreement
matrix's primary metric is ``agreement`` (the share of questions with the same class).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from scopeguard.data import read_jsonl
from scopeguard.errors import DatasetError, InputError
from scopeguard.verification.loop import VerificationResult

__all__ = [
    "CLASSES",
    "PAPER_CLASS_NAMES",
    "AgreementMatrix",
    "ClassDistribution",
    "agreement_markdown",
    "agreement_matrix",
    "class_distribution",
    "distribution_markdown",
    "read_results",
    "write_run_report",
]

CLASSES: tuple[str, ...] = ("supported", "contradicted", "not_related", "unknown")
PAPER_CLASS_NAMES: dict[str, str] = {
    "supported": "Yes",
    "contradicted": "No",
    "not_related": "Not Related",
    "unknown": "Unparsed",
}
RESULTS_FILE = "results.jsonl"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


class ClassDistribution(_Record):
    """How many answers fell in each class (Table 1)."""

    n: int
    counts: dict[str, int]

    @property
    def shares(self) -> dict[str, float]:
        return {c: (self.counts.get(c, 0) / self.n if self.n else 0.0) for c in CLASSES}


class AgreementMatrix(_Record):
    """Counts of (class in run A, class in run B) over the questions both runs answered."""

    name_a: str
    name_b: str
    counts: dict[str, dict[str, int]]
    n: int
    only_a: int = 0
    only_b: int = 0

    primary_metric: str = "agreement"

    def metrics(self) -> dict[str, float]:
        """``agreement`` (primary), ``changed``, ``cohen_kappa`` and ``n``."""
        same = sum(self.counts[c][c] for c in CLASSES)
        agree = same / self.n if self.n else 0.0
        expected = 0.0
        if self.n:
            for c in CLASSES:
                row = sum(self.counts[c].values())
                col = sum(self.counts[r][c] for r in CLASSES)
                expected += (row / self.n) * (col / self.n)
        kappa = (agree - expected) / (1 - expected) if self.n and expected < 1 else 1.0
        return {"agreement": agree, "changed": float(self.n - same), "cohen_kappa": kappa, "n": float(self.n)}


def class_distribution(results: Iterable[VerificationResult]) -> ClassDistribution:
    counts = dict.fromkeys(CLASSES, 0)
    n = 0
    for r in results:
        counts[r.verdict] += 1
        n += 1
    return ClassDistribution(n=n, counts=counts)


def _key(r: VerificationResult) -> str:
    return r.id or r.question


def agreement_matrix(
    run_a: Sequence[VerificationResult],
    run_b: Sequence[VerificationResult],
    *,
    name_a: str = "A",
    name_b: str = "B",
) -> AgreementMatrix:
    """Cross-tabulate the verdicts of two runs on the questions they share (matched by id)."""
    by_a = {_key(r): r for r in run_a}
    by_b = {_key(r): r for r in run_b}
    shared = [k for k in by_a if k in by_b]
    if not shared:
        raise InputError(f"runs {name_a!r} and {name_b!r} share no question id: nothing to compare")
    counts = {a: dict.fromkeys(CLASSES, 0) for a in CLASSES}
    for key in shared:
        counts[by_a[key].verdict][by_b[key].verdict] += 1
    return AgreementMatrix(
        name_a=name_a,
        name_b=name_b,
        counts=counts,
        n=len(shared),
        only_a=len(by_a) - len(shared),
        only_b=len(by_b) - len(shared),
    )


def _cell(count: int, n: int) -> str:
    return f"{count} ({100 * count / n:.1f}%)" if n else "0"


def distribution_markdown(runs: dict[str, ClassDistribution]) -> str:
    """Table 1: one column per run, one row per class, counts and shares."""
    names = list(runs)
    lines = ["| Predicted class | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for c in CLASSES:
        if c == "unknown" and not any(d.counts.get(c) for d in runs.values()):
            continue
        cells = [_cell(d.counts.get(c, 0), d.n) for d in runs.values()]
        lines.append(f"| {PAPER_CLASS_NAMES[c]} | " + " | ".join(cells) + " |")
    lines.append("| Total | " + " | ".join(str(d.n) for d in runs.values()) + " |")
    return "\n".join(lines)


def agreement_markdown(matrix: AgreementMatrix) -> str:
    """Tables 3-4: rows are run A's classes, columns run B's, cells count (share of n)."""
    used = [
        c
        for c in CLASSES
        if c != "unknown"
        or any(matrix.counts["unknown"].values())
        or any(matrix.counts[r]["unknown"] for r in CLASSES)
    ]
    head = f"| {matrix.name_a} \\ {matrix.name_b} | " + " | ".join(PAPER_CLASS_NAMES[c] for c in used) + " |"
    lines = [head, "|---|" + "---|" * len(used)]
    for a in used:
        cells = [_cell(matrix.counts[a][b], matrix.n) for b in used]
        lines.append(f"| {PAPER_CLASS_NAMES[a]} | " + " | ".join(cells) + " |")
    m = matrix.metrics()
    lines.append("")
    lines.append(
        f"n = {matrix.n}; same class: {m['agreement']:.1%}; changed: {int(m['changed'])}; "
        f"Cohen's kappa: {m['cohen_kappa']:.3f}"
        + (f"; only in {matrix.name_a}: {matrix.only_a}" if matrix.only_a else "")
        + (f"; only in {matrix.name_b}: {matrix.only_b}" if matrix.only_b else "")
    )
    return "\n".join(lines)


def read_results(run: str | os.PathLike[str]) -> list[VerificationResult]:
    """The results of a run folder (its ``results.jsonl``) or of a JSONL file; last row per id wins."""
    path = Path(run)
    if path.is_dir():
        path = path / RESULTS_FILE
    rows: dict[str, VerificationResult] = {}
    for lineno, obj in enumerate(read_jsonl(path), 1):
        try:
            r = VerificationResult.model_validate(obj)
        except ValidationError as exc:
            raise DatasetError(
                f"not a verification result: {exc.errors()[0]['msg']}", path=str(path), line=lineno
            ) from None
        rows[_key(r)] = r
    return list(rows.values())


def write_run_report(run_dir: str | os.PathLike[str], *, name: str | None = None) -> dict[str, Any]:
    """Write ``report.json`` and ``report.md`` (class distribution, llm calls, latency) for a run."""
    root = Path(run_dir)
    results = read_results(root)
    dist = class_distribution(results)
    label = name or root.name
    latencies = sorted(r.latency_ms for r in results)
    report: dict[str, Any] = {
        "run": label,
        "n": dist.n,
        "counts": dist.counts,
        "shares": dist.shares,
        "llm_calls": sum(r.llm_calls for r in results),
        "errors": sum(1 for r in results if r.error),
        "latency_ms_p50": latencies[len(latencies) // 2] if latencies else 0.0,
    }
    config = root / "config.json"
    if config.is_file():
        report["config"] = json.loads(config.read_text(encoding="utf-8"))
    (root / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    md = [f"# Answer verification: {label}", "", distribution_markdown({label: dist}), ""]
    md.append(
        f"LLM calls: {report['llm_calls']}; errors: {report['errors']}; "
        f"median latency per question: {report['latency_ms_p50'] / 1000:.1f} s"
    )
    (root / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return report
