"""``scopeguard train-detector``: train the head of a learned detector (``nli`` or ``probe``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from scopeguard.cli._app import app, handle_errors


@app.command("train-detector")
@handle_errors
def train_detector_command(
    dataset_dir: Path = typer.Argument(..., help="Dataset folder (documents.jsonl + questions.jsonl)."),
    detector: str = typer.Option(..., "--detector", help="Which learned detector: nli or probe."),
    out: Path = typer.Option(..., "--out", help="Folder for the head (head.json, head.safetensors)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the document-grouped split and the training."),
    epochs: int = typer.Option(10, "--epochs", help="Training epochs (paper: 10)."),
    lr: float = typer.Option(1e-4, "--lr", help="Adam learning rate (paper: 1e-4)."),
    batch_size: int = typer.Option(8, "--batch-size", help="Batch size (paper: 8)."),
    weight_decay: float = typer.Option(0.0, "--weight-decay", help="Adam weight decay (paper: 0)."),
    val_fraction: float = typer.Option(0.1, "--val-fraction", help="Share of documents that pick the epoch."),
    llm: str | None = typer.Option(
        None, "--llm", help="probe: .gguf path, folder or hub name (default qwen2.5-coder-0.5b)."
    ),
    backend: str | None = typer.Option(
        None, "--backend", help="probe: llama_cpp or transformers (default: llama_cpp for GGUF)."
    ),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", help="probe: token window (documents are cut)."
    ),
    embedding_model: str | None = typer.Option(
        None, "--embedding-model", help="nli: mpnet (default), minilm, a folder or a hub name."
    ),
    pooling: str | None = typer.Option(None, "--pooling", help="nli: cls (paper, default) or mean."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """Train a detector head on DATASET_DIR and save it to --out (load it with model=OUT)."""
    from scopeguard.errors import ConfigurationError
    from scopeguard.training import LEARNED_DETECTORS, train_detector

    if detector not in LEARNED_DETECTORS:
        raise ConfigurationError(f"--detector must be one of: {', '.join(LEARNED_DETECTORS)}")
    probe_only = {"llm": llm, "backend": backend, "max_tokens": max_tokens}
    nli_only = {"embedding_model": embedding_model, "pooling": pooling}
    wrong = probe_only if detector == "nli" else nli_only
    given = [f"--{k.replace('_', '-')}" for k, v in wrong.items() if v is not None]
    if given:
        raise ConfigurationError(f"{', '.join(given)} do(es) not apply to --detector {detector}")
    extractor: dict[str, Any] = {
        k: v for k, v in (probe_only if detector == "probe" else nli_only).items() if v is not None
    }
    path = train_detector(
        dataset_dir,
        detector,
        out,
        seed=seed,
        epochs=epochs,
        lr=lr,
        batch_size=batch_size,
        weight_decay=weight_decay,
        val_fraction=val_fraction,
        progress=progress,
        **extractor,
    )
    metrics = json.loads((path / "head.json").read_text(encoding="utf-8"))["metrics"]
    shown = ", ".join(f"{k}={v:.3g}" for k, v in sorted(metrics.items()))
    typer.echo(f"saved {detector} head to {path} ({shown})")
    typer.echo(f"use it with: scopeguard.get_detector({detector!r}, model={str(path)!r})")
