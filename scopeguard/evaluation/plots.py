"""Plots of an evaluation report (matplotlib, Agg backend; needs ``scopeguard[plots]``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard._optional import require
from scopeguard.evaluation._report_records import EvaluationReport

__all__ = ["plot_confusion", "plot_rates_by_topic"]


def _pyplot() -> Any:
    matplotlib = require("matplotlib", extra="plots", feature="evaluation plots")
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_rates_by_topic(report: EvaluationReport, path: str | os.PathLike[str]) -> Path:
    """Grouped bars: defusion rate (top) and false-refusal rate (bottom) per topic, one bar per prompt."""
    plt = _pyplot()
    topics = [*report.topics, "overall"]
    x = np.arange(len(topics))
    width = 0.8 / max(1, len(report.prompts))
    fig, axes = plt.subplots(2, 1, figsize=(max(9.0, 0.9 * len(topics) + 4), 7.5), sharex=True)
    panels = (
        ("defusion", "Defusion rate of out-of-scope questions (higher is better)", "defusion rate (%)"),
        (
            "false_refusal",
            "False-refusal rate of in-scope questions (lower is better)",
            "false-refusal rate (%)",
        ),
    )
    for ax, (metric, title, ylabel) in zip(axes, panels, strict=True):
        for i, p in enumerate(report.prompts):
            s = p.defusion if metric == "defusion" else p.false_refusal
            values = [s.by_topic.get(t) for t in report.topics] + [s.rate]
            heights = [np.nan if v is None else 100 * v for v in values]
            bars = ax.bar(
                x + (i - (len(report.prompts) - 1) / 2) * width, heights, width, label=f"{p.prompt} (n={s.n})"
            )
            ax.bar_label(
                bars, labels=["n/a" if np.isnan(h) else f"{h:.0f}" for h in heights], fontsize="x-small"
            )
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 112)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), title="prompt")
    axes[-1].set_xticks(x, topics, rotation=30, ha="right")
    axes[-1].set_xlabel("topic")
    fig.suptitle(f"RAG system: {report.config.rag}   judge: {report.config.judge}", fontsize="medium")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_confusion(report: EvaluationReport, path: str | os.PathLike[str]) -> Path:
    """Detection confusion matrix: gold label (rows) x predicted label (columns), with counts."""
    if not report.confusion:
        from scopeguard.errors import InputError

        raise InputError("this run has no detection results to plot (run it with a detector)")
    plt = _pyplot()
    golds = list(report.confusion)
    preds = ["in_scope", "out_of_scope", "unknown"]
    counts = np.array([[report.confusion[g].get(p, 0) for p in preds] for g in golds])
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    im = ax.imshow(counts, cmap="Blues")
    for i in range(counts.shape[0]):
        for j in range(counts.shape[1]):
            color = "white" if counts[i, j] > counts.max() / 2 else "black"
            ax.text(j, i, str(counts[i, j]), ha="center", va="center", color=color)
    ax.set_xticks(range(len(preds)), preds)
    ax.set_yticks(range(len(golds)), golds)
    ax.set_xlabel("predicted label")
    ax.set_ylabel("gold label")
    ax.set_title(f"Out-of-scope detection: {report.config.detector}")
    fig.colorbar(im, ax=ax, label="questions")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
