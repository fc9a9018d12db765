"""A tuned reader's card: settings, data, before and after per set, the validation curve."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

__all__ = ["before_after", "machine", "render_card"]

CURVE_FILE = "curve.json"


def before_after(report: Any) -> list[str]:
    """The report's sets as a Markdown table: AUROC and accuracy before and after, false refusals and
    loss after (margin threshold 0: the reader's own Yes/No)."""
    lines = [
        "| set | n | AUROC before | AUROC after | accuracy before | accuracy after | FR after | loss after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, after in report.after.items():
        before = report.before.get(key, {})
        lines.append(
            f"| {key} | {int(after['n'])} | {before.get('auroc', float('nan')):.3f} | {after['auroc']:.3f} | "
            f"{before.get('accuracy', float('nan')):.3f} | {after['accuracy']:.3f} | "
            f"{after['false_refusal_rate']:.3f} | {after['loss']:.3f} |"
        )
    return lines


def machine(device: str) -> str:
    """The device a run trained on, as its card names it."""
    from scopeguard._optional import require

    torch = require("torch", extra="train", feature="training a reader")
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(0)} (CUDA)"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {torch.get_num_threads()} threads"


def render_card(config: Any, report: Any, machine: str, started: str) -> str:
    lines = [
        f"# Tuned reader: {config.base} + LoRA r={config.rank}",
        "",
        f"Trained by `scopeguard train-reader` on {started}, {machine}: {report.updates} updates of "
        f"{config.batch} examples ({report.examples_seen} seen) in {report.seconds / 60:.1f} min"
        + (f"; {report.skipped} not applied (non-finite loss or gradient)." if report.skipped else "."),
        "",
        "## Settings",
        "",
        "| setting | value |",
        "|---|---|",
    ]
    for key, value in config.model_dump().items():
        lines.append(f"| {key} | {value} |")
    lines += ["", "## Data", "", "| dataset | counts |", "|---|---|"]
    for name, counts in report.counts.items():
        lines.append(f"| {name} | {', '.join(f'{k} {v}' for k, v in counts.items())} |")
    lines += [
        "",
        "## Before and after (margin threshold 0: the reader's own Yes/No)",
        "",
        "Validation sets are documents held out of each training dataset; evaluation sets were never "
        "trained on (left out).",
        "",
        *before_after(report),
    ]
    lines += [
        "",
        "## Validation curve",
        "",
        "| update | validation loss | worst validation AUROC |",
        "|---|---|---|",
    ]
    for row in report.curve:
        lines.append(
            f"| {row['update']} | {row.get('validation_loss', float('nan')):.4f} | "
            f"{row.get('validation_worst_auroc', float('nan')):.3f} |"
        )
    lines += [
        "",
        f"The whole curve, and the training loss and gradient norm of every update: `{CURVE_FILE}`.",
        "",
    ]
    return "\n".join(lines)
