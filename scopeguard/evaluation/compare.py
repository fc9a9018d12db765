"""Two evaluation runs side by side (``scopeguard compare RUN_A RUN_B``).

By default the comparison is *paired*: both runs are reduced to the (question, prompt) keys
and detection questions they share, so a run over 20 questions and one over 40 are compared
on the same 20. With ``paired=False`` each run's full report is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scopeguard.errors import InputError
from scopeguard.evaluation.report import EvaluationReport, report_from_records
from scopeguard.evaluation.store import RunStore

__all__ = ["Comparison", "ComparisonRow", "compare_runs"]


@dataclass(frozen=True)
class ComparisonRow:
    prompt: str
    metric: str
    a: float | None
    b: float | None
    n_a: int
    n_b: int

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


@dataclass(frozen=True)
class Comparison:
    a: EvaluationReport
    b: EvaluationReport
    name_a: str
    name_b: str
    paired: bool
    rows: tuple[ComparisonRow, ...]

    def markdown(self) -> str:
        def pct(x: float | None, signed: bool = False) -> str:
            return "n/a" if x is None else (f"{100 * x:+.2f}" if signed else f"{100 * x:.2f}")

        lines = [
            f"A: {self.name_a} (RAG {self.a.config.rag}, judge {self.a.config.judge})",
            f"B: {self.name_b} (RAG {self.b.config.rag}, judge {self.b.config.judge})",
            "paired on shared questions" if self.paired else "each run on all its questions",
            "",
            "| prompt | metric | A (%) | B (%) | B - A | n A | n B |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            cells = [r.prompt, r.metric, pct(r.a), pct(r.b), pct(r.delta, True), str(r.n_a), str(r.n_b)]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"


def compare_runs(
    run_a: str | os.PathLike[str], run_b: str | os.PathLike[str], *, paired: bool = True
) -> Comparison:
    """Compare the runs in folders ``run_a`` and ``run_b`` (rates as fractions; delta = B - A)."""
    stores = [RunStore(run_a), RunStore(run_b)]
    for s in stores:
        if not s.exists():
            raise InputError(f"{s.root} is not an evaluation run folder (no run.json)")
    responses = [s.responses() for s in stores]
    detections = [s.detections() for s in stores]
    if paired:
        keys = responses[0].keys() & responses[1].keys()
        qids = detections[0].keys() & detections[1].keys()
        if not keys and not qids:
            raise InputError(
                f"{run_a} and {run_b} share no (question, prompt) pairs: compare runs on the same dataset, "
                "or pass --unpaired"
            )
        responses = [{k: v for k, v in r.items() if k in keys} for r in responses]
        detections = [{k: v for k, v in d.items() if k in qids} for d in detections]
    reports = [
        report_from_records(s.read_config(), list(r.values()), list(d.values()))
        for s, r, d in zip(stores, responses, detections, strict=True)
    ]
    a, b = reports
    rows: list[ComparisonRow] = []
    for name in dict.fromkeys([p.prompt for p in a.prompts] + [p.prompt for p in b.prompts]):
        pa = next((p for p in a.prompts if p.prompt == name), None)
        pb = next((p for p in b.prompts if p.prompt == name), None)
        for metric in ("defusion", "false_refusal"):
            sa = getattr(pa, metric) if pa else None
            sb = getattr(pb, metric) if pb else None
            rows.append(
                ComparisonRow(
                    prompt=name,
                    metric=f"{metric} rate",
                    a=sa.rate if sa else None,
                    b=sb.rate if sb else None,
                    n_a=sa.n if sa else 0,
                    n_b=sb.n if sb else 0,
                )
            )
    if a.detection or b.detection:
        for metric in ("accuracy", "f1_oos", "auroc"):
            rows.append(
                ComparisonRow(
                    prompt="(detector)",
                    metric=metric,
                    a=(a.detection or {}).get(metric),
                    b=(b.detection or {}).get(metric),
                    n_a=int((a.detection or {}).get("n") or 0),
                    n_b=int((b.detection or {}).get("n") or 0),
                )
            )
    return Comparison(a=a, b=b, name_a=str(run_a), name_b=str(run_b), paired=paired, rows=tuple(rows))
