"""Numbers, tables and a summary from the records of an evaluation run (ELOQ Table 5 style).

For each prompt:

* **defusion rate**: share of out-of-scope questions whose response defuses the question
  (ELOQ's "accuracy in defusing"); ``1 - defusion rate`` is how often the system answered an
  unanswerable question, i.e. hallucinated;
* **false-refusal rate**: share of in-scope questions whose response refused or claimed the
  information is missing.

Each is given overall (pooled over questions) and per topic, with the mean, the population
standard deviation (as in ELOQ Table 5) and the min and max topic. Judgements that could not be
parsed (unknown) and errored steps are left out of the rates and counted separately.
The best prompt is the one with the highest defusion rate; the best *balanced* prompt maximises
the mean of the defusion rate and ``1 - false-refusal rate``.

With a detector, the report also puts each prompt behind the guard (``PromptReport.guarded``,
``EvaluationReport.routes``; :mod:`scopeguard.evaluation._guarded` has the rules): the detector's
verdict routes each question to the policy (refused), to a hedged answer (an in-scope verdict in
a calibration profile's hedge band) or to the answer, and the defusion and false-refusal rates
come with hedged answers counted as answers, and counted as defused / refused
(``*_with_hedges``).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from scopeguard.data import atomic_write_text
from scopeguard.evaluation._guarded import (
    GuardedRates,
    Routes,
    guarded_markdown,
    guarded_rates,
    guarded_summary,
    routes,
)
from scopeguard.evaluation._rates import Metric, RateSummary, rate_summary
from scopeguard.evaluation._rates import markdown_table as _markdown
from scopeguard.evaluation._rates import pct as _pct
from scopeguard.evaluation._report_records import EvaluationReport, PromptReport
from scopeguard.evaluation.refusal import lexical_refusal
from scopeguard.evaluation.store import DetectionRecord, ResponseRecord, RunConfig, RunStore
from scopeguard.types import Verdict

__all__ = [
    "EvaluationReport",
    "GuardedRates",
    "PromptReport",
    "RateSummary",
    "Routes",
    "build_report",
    "markdown_report",
    "report_from_records",
    "topic_table",
    "write_evaluation_report",
]


def _summarise(metric: Metric, records: list[ResponseRecord]) -> RateSummary:
    label = "out_of_scope" if metric == "defusion" else "in_scope"
    rows = [r for r in records if r.label == label]
    values: dict[str, list[bool]] = defaultdict(list)
    unknown = errors = 0
    for r in rows:
        if r.error is not None:
            errors += 1
            continue
        judgement = r.defusion if metric == "defusion" else r.refusal
        if judgement is None or judgement.value is None:
            unknown += 1
            continue
        values[r.topic].append(judgement.value)
    return rate_summary(metric, values, unknown, errors)


def _prompt_report(prompt: str, records: list[ResponseRecord], verdicts: dict[str, Verdict]) -> PromptReport:
    judgements = [j for r in records for j in (r.defusion, r.refusal) if j is not None]
    seconds = [r.seconds for r in records if r.error is None]
    return PromptReport(
        prompt=prompt,
        defusion=_summarise("defusion", records),
        false_refusal=_summarise("false_refusal", records),
        judge_llm_calls=sum(j.llm_calls for j in judgements),
        lexical_decisions=sum(j.method == "lexical" for j in judgements),
        truncated_judge_replies=sum(j.truncated for j in judgements),
        truncated_responses=sum(r.truncated for r in records if r.error is None),
        seconds_median=float(np.median(seconds)) if seconds else None,
        explicit_refusal_oos=_explicit_refusals(records, "out_of_scope"),
        explicit_refusal_in=_explicit_refusals(records, "in_scope"),
        judge_on_explicit_refusals=_judge_on_explicit_refusals(records),
        guarded=guarded_rates(records, verdicts) if verdicts else None,
    )


def _answered(records: list[ResponseRecord], label: str) -> list[ResponseRecord]:
    return [r for r in records if r.label == label and r.error is None and r.response is not None]


def _judge_on_explicit_refusals(records: list[ResponseRecord]) -> tuple[int, int]:
    values = [
        r.defusion.value
        for r in _answered(records, "out_of_scope")
        if r.defusion is not None
        and r.defusion.value is not None
        and lexical_refusal(r.response or "") is True
    ]
    return sum(v is True for v in values), len(values)


def _explicit_refusals(records: list[ResponseRecord], label: str) -> float | None:
    """A judge-free cross-check: the share of responses the lexical pre-check calls a refusal."""
    responses = [r.response or "" for r in _answered(records, label)]
    if not responses:
        return None
    return sum(lexical_refusal(text) is True for text in responses) / len(responses)


def _detection(
    records: Iterable[DetectionRecord],
) -> tuple[dict[str, float | None] | None, dict[str, dict[str, int]] | None]:
    from scopeguard.evaluation.detection import detection_metrics

    records = list(records)
    done = [r for r in records if r.verdict is not None]
    if not done:
        return None, None
    verdicts = [r.verdict for r in done if r.verdict is not None]
    raw = detection_metrics([r.label for r in done], verdicts)
    metrics: dict[str, float | None] = {k: None if math.isnan(v) else float(v) for k, v in raw.items()}
    metrics["errors"] = float(sum(1 for r in records if r.verdict is None))
    confusion = {
        g: {p: 0 for p in ("in_scope", "out_of_scope", "unknown")} for g in ("in_scope", "out_of_scope")
    }
    for r, v in zip(done, verdicts, strict=True):
        confusion[r.label][v.label] += 1
    return metrics, confusion


def build_report(run: str | os.PathLike[str] | RunStore) -> EvaluationReport:
    """Compute every number of the run in folder ``run`` from its stored records."""
    store = run if isinstance(run, RunStore) else RunStore(run)
    return report_from_records(
        store.read_config(), list(store.responses().values()), list(store.detections().values())
    )


def report_from_records(
    config: RunConfig, responses: list[ResponseRecord], detections: list[DetectionRecord]
) -> EvaluationReport:
    """Compute the report from records already loaded (or filtered, as ``compare`` does)."""
    by_prompt: dict[str, list[ResponseRecord]] = defaultdict(list)
    for r in responses:
        by_prompt[r.prompt].append(r)
    order = [p for p in config.prompts if p in by_prompt] + sorted(set(by_prompt) - set(config.prompts))
    verdicts = {d.question_id: d.verdict for d in detections if d.verdict is not None}
    prompts = tuple(_prompt_report(p, by_prompt[p], verdicts) for p in order)
    topics = tuple(sorted({r.topic for r in responses}))
    detection, confusion = _detection(detections)

    scored = [p for p in prompts if p.defusion.rate is not None]
    best = max(scored, key=lambda p: p.defusion.rate or 0.0).prompt if scored else None
    balanced = [p for p in scored if p.false_refusal.rate is not None]
    best_balanced = (
        max(balanced, key=lambda p: (p.defusion.rate or 0.0) + 1 - (p.false_refusal.rate or 0.0)).prompt
        if balanced
        else None
    )
    topic_means = {
        t: float(np.mean([p.defusion.by_topic[t] for p in prompts if t in p.defusion.by_topic]))
        for t in topics
        if any(t in p.defusion.by_topic for p in prompts)
    }
    worst = min(topic_means, key=lambda t: topic_means[t]) if topic_means else None
    report = EvaluationReport(
        config=config,
        topics=topics,
        prompts=prompts,
        detection=detection,
        confusion=confusion,
        routes=routes(detections) if verdicts else None,
        best_prompt=best,
        best_balanced_prompt=best_balanced,
        worst_topic=worst,
    )
    return report.model_copy(update={"summary": _summary_text(report, topic_means)})


def _judge_sanity(counts: tuple[int, int]) -> str:
    agreed, n = counts
    if not n:
        return ""
    text = f" The judge called {agreed} of the {n} judged explicit refusals defused"
    return text + (": treat its defusion rate with caution." if agreed < 0.8 * n else ".")


def _capped_text(p: PromptReport) -> str:
    parts = [
        f"{n} {what} hit the reply cap"
        for n, what in (
            (p.truncated_responses, "RAG responses"),
            (p.truncated_judge_replies, "judge replies"),
        )
        if n
    ]
    return f" {' and '.join(parts)} (max_tokens)." if parts else ""


def _summary_text(report: EvaluationReport, topic_means: dict[str, float]) -> str:
    lines = [
        f"Evaluation of {report.config.rag} (judge: {report.config.judge}, votes: {report.config.votes})."
    ]
    for p in report.prompts:
        d, f = p.defusion, p.false_refusal
        lines.append(
            f"- {p.prompt}: defused {_pct(d.rate)}% of out-of-scope questions (n={d.n}, unknown={d.unknown}, "
            f"errors={d.errors}); falsely refused {_pct(f.rate)}% of in-scope questions (n={f.n}, "
            f"unknown={f.unknown}, errors={f.errors}; lexical pre-check decided {p.lexical_decisions}). "
            f"Judge-free check: {_pct(p.explicit_refusal_oos)}% of out-of-scope and "
            f"{_pct(p.explicit_refusal_in)}% of in-scope responses open with an explicit refusal."
            + _judge_sanity(p.judge_on_explicit_refusals)
            + _capped_text(p)
        )
    if report.best_prompt:
        best = report.prompt(report.best_prompt)
        tied = [p.prompt for p in report.prompts if p.defusion.rate == best.defusion.rate]
        if len(tied) > 1:
            lines.append(
                f"Best prompt (defusion): tie between {', '.join(tied)} ({_pct(best.defusion.rate)}%)."
            )
        else:
            lines.append(f"Best prompt (defusion): {best.prompt} ({_pct(best.defusion.rate)}%).")
    if report.best_balanced_prompt and report.best_balanced_prompt != report.best_prompt:
        lines.append(
            "Best balanced prompt (defusion and answering in-scope questions): "
            f"{report.best_balanced_prompt}."
        )
    if report.worst_topic:
        worst = report.worst_topic
        lines.append(f"Worst topic: {worst} (mean defusion over prompts {_pct(topic_means[worst])}%).")
    if report.detection:
        m = report.detection
        lines.append(
            f"Detector {report.config.detector}: accuracy {_pct(m.get('accuracy'))}%, "
            f"F1(out-of-scope) {_pct(m.get('f1_oos'))}% on n={int(m.get('n') or 0)}."
        )
    if report.routes:
        lines += guarded_summary(report.routes, [(p.prompt, p.guarded) for p in report.prompts])
    small = [p.prompt for p in report.prompts if p.defusion.n < 30]
    if small:
        lines.append("Few questions per prompt (n < 30): treat the rates as rough.")
    return "\n".join(lines)


def topic_table(report: EvaluationReport, metric: Metric) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a Table-5-style table (percentages) for ``metric``."""
    header = ["prompt", *report.topics, "avg", "std", "min topic", "max topic", "overall", "n"]
    rows = []
    for p in report.prompts:
        s = p.defusion if metric == "defusion" else p.false_refusal
        rows.append(
            [
                p.prompt,
                *(_pct(s.by_topic.get(t)) for t in report.topics),
                _pct(s.topic_mean),
                _pct(s.topic_std),
                f"{s.min_topic} ({_pct(s.by_topic[s.min_topic])})" if s.min_topic else "n/a",
                f"{s.max_topic} ({_pct(s.by_topic[s.max_topic])})" if s.max_topic else "n/a",
                _pct(s.rate),
                str(s.n),
            ]
        )
    return header, rows


def _csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def markdown_report(report: EvaluationReport) -> str:
    parts = ["# Out-of-scope evaluation", "", report.summary, ""]
    titles = {
        "defusion": "Defusion rate of out-of-scope questions (%, higher is better)",
        "false_refusal": "False-refusal rate of in-scope questions (%, lower is better)",
    }
    for metric in ("defusion", "false_refusal"):
        parts += [f"## {titles[metric]}", "", _markdown(*topic_table(report, metric)), ""]  # type: ignore[arg-type]
    parts.append(
        "avg and std are over topics (population std, as in ELOQ Table 5); overall pools all questions."
    )
    if report.detection and report.confusion:
        parts += ["", f"## Detection ({report.config.detector})", ""]
        parts.append(
            _markdown(
                ["metric", "value"],
                [[k, "n/a" if v is None else f"{v:.4g}"] for k, v in report.detection.items()],
            )
        )
        parts += ["", "Confusion matrix (rows: gold, columns: predicted):", ""]
        cols = ["in_scope", "out_of_scope", "unknown"]
        parts.append(
            _markdown(
                ["gold", *cols], [[g, *(str(row[c]) for c in cols)] for g, row in report.confusion.items()]
            )
        )
    if report.routes:
        parts += ["", *guarded_markdown(report.routes, [(p.prompt, p.guarded) for p in report.prompts])]
    return "\n".join(parts) + "\n"


def write_evaluation_report(run: str | os.PathLike[str], *, plots: bool = True) -> EvaluationReport:
    """Build the report of the run in ``run`` and write it there.

    Files: ``report.md``, ``summary.txt``, ``metrics.json``, ``defusion_by_topic.csv``,
    ``false_refusal_by_topic.csv`` and, with ``plots=True`` (needs ``scopeguard[plots]``),
    ``defusion_by_topic.png`` and ``detection_confusion.png`` (when a detector ran).
    """
    root = Path(run)
    report = build_report(root)
    atomic_write_text(root / "metrics.json", report.model_dump_json(indent=2))
    atomic_write_text(root / "summary.txt", report.summary + "\n")
    atomic_write_text(root / "report.md", markdown_report(report))
    atomic_write_text(root / "defusion_by_topic.csv", _csv(*topic_table(report, "defusion")))
    atomic_write_text(root / "false_refusal_by_topic.csv", _csv(*topic_table(report, "false_refusal")))
    if plots:
        from scopeguard.evaluation.plots import plot_confusion, plot_rates_by_topic

        plot_rates_by_topic(report, root / "defusion_by_topic.png")
        if report.confusion:
            plot_confusion(report, root / "detection_confusion.png")
    return report
