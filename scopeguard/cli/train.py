"""``scopeguard train-detector``: fit a detector's head on labelled data.

``fast``, ``logprob`` and ``default`` (the reading head) are fitted by
:func:`scopeguard.detection.head.fitting.fit_detector` on one or more datasets; ``nli`` and
``probe`` train the paper's MLP head (:func:`scopeguard.detection.head.training.train_detector`, one dataset).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from scopeguard.cli._app import command, metric_text, same_sources
from scopeguard.cli._options import RENAMED_LLM, refuse_renamed_llm
from scopeguard.detection.head.fitting import DEFAULT_L2, DEFAULT_LAYER, DEFAULT_SIGNALS

_TRAINABLE = "default, fast, logprob, nli or probe"


def _max_docs(raw: str | None, n: int) -> int | list[int | None] | None:
    from scopeguard.errors import ConfigurationError

    if raw is None:
        return None
    try:
        values = [int(v) for v in raw.split(",")]
    except ValueError:
        raise ConfigurationError(f"--max-docs takes N or N1,N2,... (integers), got {raw!r}") from None
    if any(v < 0 for v in values):
        raise ConfigurationError(f"--max-docs values must be >= 0, got {raw!r}")
    if len(values) == 1:
        return values[0] or None
    if len(values) != n:
        raise ConfigurationError(f"--max-docs has {len(values)} values for {n} datasets")
    return [v or None for v in values]


def _print_fit(report: Any) -> None:
    cols = ("n", "accuracy", "false_refusal_rate", "oos_recall", "auroc", "lodo_accuracy", "lodo_auroc")
    typer.echo(f"{'dataset':<24} " + " ".join(f"{c:>18}" for c in cols))
    rows = [*report.per_dataset.items(), ("all (out of fold)", report.overall)]
    for name, point in rows:
        typer.echo(f"{name:<24} " + " ".join(f"{metric_text(point.get(c)):>18}" for c in cols))


@command("train-detector")
def train_detector_command(
    datasets: list[Path] = typer.Argument(
        ..., help="Dataset folder(s) (documents.jsonl + questions.jsonl); several for fast/logprob/default."
    ),
    detector: str = typer.Option(..., "--detector", help=f"Which detector: {_TRAINABLE}."),
    out: Path = typer.Option(..., "--out", help="Folder for the head (load it with model=OUT)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the document-grouped folds (and the training)."),
    folds: int = typer.Option(5, "--folds", help="fast/logprob/default: document-grouped CV folds."),
    max_docs: str | None = typer.Option(
        None,
        "--max-docs",
        help="fast/logprob/default: use N documents of each dataset (seeded draw); N1,N2,... gives each "
        "dataset its own (0 = all).",
    ),
    signals: str = typer.Option(
        ",".join(DEFAULT_SIGNALS),
        "--signals",
        help="default: the signals the head reads, from margin, inference_margin, hidden.",
    ),
    l2: float = typer.Option(DEFAULT_L2, "--l2", help="default: L2 penalty of the logistic head."),
    max_false_refusal: float | None = typer.Option(
        None,
        "--max-false-refusal",
        help="default: choose the most accurate threshold whose out-of-fold false-refusal rate is at "
        "most this on every dataset (default: the most accurate threshold).",
    ),
    threshold_on: str = typer.Option(
        "cv",
        "--threshold-on",
        help="default: choose the threshold on the document-grouped CV scores (cv) or on the "
        "leave-one-dataset-out ones (lodo: what a corpus the head never saw gets; the packaged head).",
    ),
    platt_lodo: bool = typer.Option(
        False,
        "--platt-lodo",
        help="default: Platt-scale the head on its leave-one-dataset-out scores, so that its "
        "P(out of scope) is calibrated on corpora it never saw (the packaged head).",
    ),
    same_source: list[str] = typer.Option(
        [],
        "--same-source",
        help="fast/logprob/default: NAME=OTHER counts dataset NAME as OTHER when datasets are left out "
        "in turn (e.g. squad2-train-extra=squad2-train).",
    ),
    balance: bool = typer.Option(
        True, "--balance/--no-balance", help="fast/logprob/default: every dataset weighs the same."
    ),
    epochs: int = typer.Option(10, "--epochs", help="nli/probe: training epochs (paper: 10)."),
    lr: float = typer.Option(1e-4, "--lr", help="nli/probe: Adam learning rate (paper: 1e-4)."),
    batch_size: int = typer.Option(8, "--batch-size", help="nli/probe: batch size (paper: 8)."),
    weight_decay: float = typer.Option(
        0.0, "--weight-decay", help="nli/probe: Adam weight decay (paper: 0)."
    ),
    val_fraction: float = typer.Option(
        0.1, "--val-fraction", help="nli/probe: documents that pick the epoch."
    ),
    reader: str | None = typer.Option(
        None,
        "--reader",
        metavar="SPEC",
        help="The reading model. logprob/default: a spec (local, local:NAME_OR_FOLDER, a tuned reader "
        "from train-reader, transformers:NAME; default local:qwen2.5-coder-1.5b); probe: a .gguf "
        "path, folder or hub name (default qwen2.5-coder-0.5b).",
    ),
    llm: str | None = RENAMED_LLM,
    backend: str | None = typer.Option(
        None, "--backend", help="probe: llama_cpp or transformers (default: llama_cpp for GGUF)."
    ),
    layer: int | None = typer.Option(
        None,
        "--layer",
        help="probe: hidden layer, negative from the top (-1 = last; -4 often better); default: the "
        f"reading model's layer whose hidden state the head reads (default {DEFAULT_LAYER}).",
    ),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", help="probe: token window (documents are cut)."
    ),
    embedding_model: str | None = typer.Option(
        None, "--embedding-model", help="nli: mpnet (default), minilm, a folder or a hub name."
    ),
    pooling: str | None = typer.Option(None, "--pooling", help="nli: cls (paper, default) or mean."),
    paper: bool = typer.Option(
        False,
        "--paper",
        help="nli/probe: the paper's training exactly (TrainSettings.paper(): raw features, not "
        "standardised; the other defaults already are the paper's).",
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Fit a detector's head on DATASETS and save it to --out (load it with model=OUT)."""
    from scopeguard.detection.head.fitting import SCORING_DETECTORS, fit_detector
    from scopeguard.detection.head.mlp import TrainSettings
    from scopeguard.detection.head.training import LEARNED_DETECTORS, train_detector
    from scopeguard.errors import ConfigurationError

    refuse_renamed_llm("train-detector", llm)
    if detector not in (*SCORING_DETECTORS, *LEARNED_DETECTORS):
        raise ConfigurationError(f"--detector must be one of: {_TRAINABLE}")
    show = None if progress else False
    if detector in SCORING_DETECTORS:
        mlp_only = {
            "--backend": backend,
            "--max-tokens": max_tokens,
            "--embedding-model": embedding_model,
            "--pooling": pooling,
        }
        given = [k for k, v in mlp_only.items() if v is not None]
        if detector == "fast" and reader is not None:
            given.append("--reader")
        if detector != "default" and layer is not None:
            given.append("--layer")
        if paper:
            given.append("--paper")
        if given:
            raise ConfigurationError(f"{', '.join(given)} do(es) not apply to --detector {detector}")
        sources = same_sources(same_source)
        report = fit_detector(
            datasets,
            detector,
            out,
            llm=reader,
            max_docs=_max_docs(max_docs, len(datasets)),
            folds=folds,
            seed=seed,
            balance=balance,
            signals=tuple(s.strip() for s in signals.split(",") if s.strip()),
            layer=DEFAULT_LAYER if layer is None else layer,
            l2=l2,
            same_source=sources,
            max_false_refusal=max_false_refusal,
            threshold_on=threshold_on,
            platt_lodo=platt_lodo,
            progress=show,
        )
        typer.echo(f"{detector}: {report.n} questions, {folds}-fold document-grouped CV")
        _print_fit(report)
        typer.echo(f"saved {detector} head to {report.path}")
        typer.echo(f"use it with: scopeguard.get_detector({detector!r}, model={str(report.path.parent)!r})")
        return

    if len(datasets) != 1:
        raise ConfigurationError(f"--detector {detector} trains on one dataset folder, got {len(datasets)}")
    if max_docs is not None:
        raise ConfigurationError(f"--max-docs does not apply to --detector {detector}")
    probe_only = {"llm": reader, "backend": backend, "max_tokens": max_tokens, "layer": layer}
    nli_only = {"embedding_model": embedding_model, "pooling": pooling}
    wrong = probe_only if detector == "nli" else nli_only
    given = [
        f"--{'reader' if k == 'llm' else k.replace('_', '-')}" for k, v in wrong.items() if v is not None
    ]
    if given:
        raise ConfigurationError(f"{', '.join(given)} do(es) not apply to --detector {detector}")
    extractor: dict[str, Any] = {
        k: v for k, v in (probe_only if detector == "probe" else nli_only).items() if v is not None
    }
    preset = TrainSettings.paper() if paper else TrainSettings()
    path = train_detector(
        datasets[0],
        detector,
        out,
        seed=seed,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        weight_decay=weight_decay,
        val_fraction=val_fraction,
        progress=progress,
        standardize=preset.standardize,
        **extractor,
    )
    metrics = json.loads((path / "head.json").read_text(encoding="utf-8"))["metrics"]
    shown = ", ".join(f"{k}={v:.3g}" for k, v in sorted(metrics.items()))
    typer.echo(f"saved {detector} head to {path} ({shown})")
    typer.echo(f"use it with: scopeguard.get_detector({detector!r}, model={str(path)!r})")
