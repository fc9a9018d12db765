"""Write a retrieval study as Markdown and CSV tables (ELOQ Table 6 shape), JSON and a Recall@k plot."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path

from scopeguard._optional import require
from scopeguard.data import atomic_write_text
from scopeguard.retrieval._study_result import StudyResult

__all__ = ["markdown_table", "plot_recall_curves", "write_study_report"]

_LINE_STYLES = ("-", "--", ":", "-.")
_LABEL_TITLES = {"out_of_scope": "Out-of-scope questions", "in_scope": "In-scope questions"}


def _columns(result: StudyResult) -> list[str]:
    return [*(f"recall@{k}" for k in result.ks), "mrr", "ndcg@10"]


def _title(metric: str) -> str:
    return {"mrr": "MRR", "ndcg@10": "nDCG@10"}.get(metric, metric.replace("recall@", "Recall@"))


def markdown_table(result: StudyResult, group: str = "out_of_scope", *, intervals: bool = True) -> str:
    """One row per retriever, as in ELOQ Table 6 (values with their bootstrap interval)."""
    cols = _columns(result)
    lines = [
        "| Model | n | " + " | ".join(_title(c) for c in cols) + " |",
        "|---|---:|" + "---:|" * len(cols),
    ]
    for name, r in result.retrievers.items():
        g = r.groups.get(group)
        if g is None:
            continue
        cells = []
        for c in cols:
            e = g.metrics[c]
            cell = "n/a" if math.isnan(e.value) else f"{e.value:.4f}"
            if intervals and not math.isnan(e.value):
                cell += f" [{e.low:.2f}, {e.high:.2f}]"
            cells.append(cell)
        lines.append(f"| {name} | {g.n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _markdown(result: StudyResult) -> str:
    conf = next(iter(next(iter(result.retrievers.values())).groups.values())).confidence
    parts = [
        "# Retrieval study",
        "",
        f"{result.n_questions} questions against {result.n_documents} documents; the relevant document "
        f"of a question is the one it was written from. Search depth {result.depth} (MRR is "
        f"MRR@{result.depth}); ties rank in document order. Brackets: {conf:.0%} bootstrap intervals.",
    ]
    if result.missing_doc_ids:
        parts.append(
            f"\n{len(result.missing_doc_ids)} question document(s) are not in the corpus and count as "
            f"misses: {', '.join(result.missing_doc_ids[:20])}"
        )
    for group in ("out_of_scope", "in_scope", "all"):
        parts += ["", f"## {_LABEL_TITLES.get(group, 'All questions')}", "", markdown_table(result, group)]
    topics = sorted(
        {k.split("/")[0] for r in result.retrievers.values() for k in r.groups if k.startswith("topic:")}
    )
    for topic in topics:
        parts += [
            "",
            f"## Topic {topic[len('topic:') :]}: out-of-scope",
            "",
            markdown_table(result, f"{topic}/out_of_scope"),
        ]
    return "\n".join(parts) + "\n"


def _csv(result: StudyResult) -> str:
    cols = _columns(result)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(
        [
            "retriever",
            "group",
            "n",
            "n_missing",
            *cols,
            *(f"{c}_low" for c in cols),
            *(f"{c}_high" for c in cols),
        ]
    )
    for name, r in result.retrievers.items():
        for group, g in r.groups.items():
            m = g.metrics
            writer.writerow(
                [name, group, g.n, g.n_missing]
                + [f"{m[c].value:.6f}" for c in cols]
                + [f"{m[c].low:.6f}" for c in cols]
                + [f"{m[c].high:.6f}" for c in cols]
            )
    return buf.getvalue()


def plot_recall_curves(result: StudyResult, path: str | os.PathLike[str]) -> Path:
    """A PNG with Recall@k (k = 1..max k) per retriever, one panel per question label."""
    matplotlib = require("matplotlib", extra="plots", feature="the retrieval study plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, label in zip(axes, ("out_of_scope", "in_scope"), strict=True):
        for i, (name, r) in enumerate(result.retrievers.items()):
            curve = r.curves.get(label, [])
            if not curve or label not in r.groups or r.groups[label].n == 0:
                continue
            style = _LINE_STYLES[i % len(_LINE_STYLES)]  # equal curves (bm25 vs bm25s) stay visible
            ax.plot(range(1, len(curve) + 1), curve, linestyle=style, marker="o", markersize=3, label=name)
        n_label = sum(1 for q in next(iter(result.retrievers.values())).rankings if q.label == label)
        ax.set_title(f"{_LABEL_TITLES[label]} (n={n_label})")
        ax.set_xlabel("k (documents retrieved)")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(0.0, 1.02)
        ax.legend(title="retriever", loc="lower right")
    axes[0].set_ylabel("Recall@k (own document retrieved)")
    fig.suptitle(f"Recall@k of each question's own document ({result.n_documents} documents)")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def write_study_report(
    result: StudyResult, out_dir: str | os.PathLike[str], *, plot: bool = True
) -> dict[str, Path]:
    """Write ``retrieval_study.{md,csv,json}`` and ``recall_at_k.png`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": out / "retrieval_study.md",
        "csv": out / "retrieval_study.csv",
        "json": out / "retrieval_study.json",
    }
    atomic_write_text(paths["markdown"], _markdown(result))
    atomic_write_text(paths["csv"], _csv(result))
    atomic_write_text(paths["json"], json.dumps(result.to_json(), indent=2) + "\n")
    if plot:
        paths["plot"] = plot_recall_curves(result, out / "recall_at_k.png")
    return paths
