"""CLI commands for detectors: ``eval-detector`` (and ``train-detector``, below the marked line).

In ``--json`` output a metric that is undefined (AUROC with one class present) is ``null``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from scopeguard.cli._app import app, exit_if_failed, handle_errors

_TABLE_ROWS = (
    ("n", "questions", "{:.0f}"),
    ("accuracy", "accuracy", "{:.3f}"),
    ("precision_oos", "precision (out of scope)", "{:.3f}"),
    ("recall_oos", "recall (out of scope)", "{:.3f}"),
    ("f1_oos", "F1 (out of scope)", "{:.3f}"),
    ("auroc", "AUROC", "{:.3f}"),
    ("unknown_rate", "unknown rate", "{:.1%}"),
    ("latency_ms_p50", "latency p50 (ms)", "{:.1f}"),
    ("latency_ms_p95", "latency p95 (ms)", "{:.1f}"),
    ("escalated_share", "escalated", "{:.1%}"),
    ("llm_calls_mean", "LLM calls / question", "{:.2f}"),
)


def _fmt(fmt: str, value: float) -> str:
    return "n/a" if isinstance(value, float) and math.isnan(value) else fmt.format(value)


@app.command("eval-detector")
@handle_errors
def eval_detector_command(
    dataset: Path = typer.Argument(..., help="Dataset folder (documents.jsonl + questions.jsonl)."),
    detector: str = typer.Option(
        "default", "--detector", "-d", help="Detector name: default, fast, lexical, nli, probe, judge, ..."
    ),
    model: Path | None = typer.Option(
        None, "--model", help="Trained head (file or folder) passed to the detector as model=."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    limit: int | None = typer.Option(None, "--limit", help="Evaluate only the first N questions."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on a terminal."),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="torch threads for embedding models (1 is fastest on a busy machine).",
    ),
) -> None:
    """Run a detector on every question of DATASET against its own document and print the metrics.

    Exits 1 when the detector failed on any question (it counts as unknown), 2 when it could not run.
    """
    from scopeguard.data import load_dataset
    from scopeguard.detectors import get_detector
    from scopeguard.errors import InputError
    from scopeguard.evaluation.detection import detection_metrics, run_detector

    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if threads is not None:
        if threads < 1:
            raise InputError(f"--threads must be at least 1, got {threads}")
        from scopeguard._optional import require

        require("torch", extra="embeddings", feature="--threads").set_num_threads(threads)
    ds = load_dataset(dataset)
    det = get_detector(detector, **({"model": model} if model is not None else {}))
    y_true, verdicts = run_detector(det, ds, limit=limit, progress=None if progress else False)
    metrics = detection_metrics(y_true, verdicts)
    trained_on = _trained_on(det)
    if trained_on and trained_on == Path(dataset).resolve().name:
        typer.echo(
            f"note: this detector's head was trained on {trained_on!r}: the accuracy below is training "
            "accuracy; quote document-grouped cross-validation instead (benchmarks/detectors.py)",
            err=True,
        )
    if as_json:
        out = {"detector": detector, "dataset": str(dataset), **metrics}
        typer.echo(
            json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()})
        )
    else:
        typer.echo(f"detector {detector} on {dataset}")
        width = max(len(label) for _, label, _ in _TABLE_ROWS)
        for key, label, fmt in _TABLE_ROWS:
            typer.echo(f"  {label:<{width}}  {_fmt(fmt, metrics[key])}")
    failed = [v for v in verdicts if v.error is not None]
    exit_if_failed(
        len(failed),
        len(verdicts),
        "questions",
        "the detector raised (counted as 'unknown' in the metrics); first error: "
        + ((failed[0].error or "") if failed else ""),
    )


# ---------------------------------------------------------------------------------------------
# train-detector: appended below by the learned-detectors engineer (nli / probe heads).
# ---------------------------------------------------------------------------------------------


def _trained_on(detector: object) -> str | None:
    """The dataset name a detector's shipped head records as its training data, if any."""
    head = getattr(detector, "head", None) or getattr(getattr(detector, "first", None), "head", None)
    info = getattr(head, "info", None)
    return str(info["trained_on"]) if isinstance(info, dict) and info.get("trained_on") else None
