"""The card saved beside a ``default`` head (``scopeguard/_assets/default_head.md``): what it reads,
what it was fitted on, how it did out of fold, and its short-passage shift's study."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from scopeguard.detection.signals import INFERENCE_TEMPLATE

__all__ = ["model_card"]


def _data_line(datasets: Sequence[str], max_docs: Any) -> str:
    """Each dataset with the documents drawn from it (``max_docs``: one value, or one per dataset
    in the order the datasets were given)."""
    if not datasets:
        return "?"
    limits = max_docs if isinstance(max_docs, list) else [max_docs] * len(datasets)
    if len(limits) != len(datasets):
        return ", ".join(datasets)
    pairs = zip(datasets, limits, strict=True)
    return ", ".join(f"{d} ({'all' if m in (None, 0) else m} documents)" for d, m in pairs)


def model_card(head: Any) -> str:
    """The card of ``head`` (a :class:`~scopeguard.detection.head.default.DefaultHead`): what it
    reads, what it was fitted on, and how it did out of fold."""
    info = head.info
    lines = [
        "# scopeguard default head",
        "",
        f"- Reading model: `{head.verdict_model}` (prompt `{head.template}`"
        + (f", then `{INFERENCE_TEMPLATE}` on the same document state" if head.probes else "")
        + ")",
        f"- Signals: {', '.join(head.signals)}"
        + (f"; hidden state of layer {head.layer} at the verdict position" if head.layer else ""),
        f"- Logistic head, L2 {info.get('l2', '?')}, threshold {head.threshold:.3f} on P(out of scope)",
        f"- Data: {_data_line(info.get('datasets', []), info.get('max_docs'))}; "
        f"{info.get('n', '?')} questions",
        "- Each dataset, and each class within it, weighs the same in the fit.",
    ]
    if info.get("selection"):
        lines.append(f"- Chosen by: {info['selection']}")
    lines += [
        "",
        "| "
        + " | ".join(
            (
                "dataset",
                "n",
                "CV accuracy",
                "CV AUROC",
                "CV false refusals",
                "LODO accuracy",
                "LODO AUROC",
                "LODO false refusals",
                "LODO caught",
                "LODO caught at 10% false refusals",
            )
        )
        + " |",
    ]
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    cv = info.get("cv", {}).get("per_dataset", {})
    lodo = info.get("lodo", {})
    for name in sorted(cv):
        c, lo = cv[name], lodo.get(name, {})

        def f(d: dict[str, Any], k: str) -> str:
            v = d.get(k)
            return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

        lines.append(
            f"| {name} | {c.get('n')} | {f(c, 'accuracy')} | {f(c, 'auroc')} | {f(c, 'false_refusal_rate')} "
            f"| {f(lo, 'accuracy')} | {f(lo, 'auroc')} | {f(lo, 'false_refusal_rate')} "
            f"| {f(lo, 'oos_recall')} | {f(lo.get('extra', {}), 'caught_at_10')} |"
        )
    lines += [
        "",
        "CV: document-grouped, out of fold, on all the data. LODO: fitted on the other datasets, "
        "scored on this one. Both at the head's threshold, except the last column: the share of "
        "out-of-scope questions caught at the threshold that, in hindsight, refuses at most 10% of "
        "that dataset's in-scope questions (what a calibration profile can reach).",
        "",
    ]
    short = info.get("short_passages")
    if head.short_passages is not None and isinstance(short, dict):
        lines += [f"Short passages: {short.get('selection', '')}.", ""]
        lines += ["| snippets of | shift | false refusals | caught |", "|---|---|---|---|"]
        for name, point in sorted(short.get("left_out", {}).items()):
            fr, caught = point["false_refusals"], point["caught"]
            lines.append(
                f"| {name} (left out) | {point['shift']:g} | {fr['value']:.3f} [{fr['low']:.2f}, "
                f"{fr['high']:.2f}] | {caught['value']:.3f} |"
            )
        lines.append("")
    return "\n".join(lines)
