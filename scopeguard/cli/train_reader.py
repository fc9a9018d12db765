"""``scopeguard train-reader``: LoRA-tune the reading model on the verdict (see
:mod:`scopeguard.detection.tune`)."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import typer

from scopeguard.cli._app import command, config_option, same_sources
from scopeguard.cli._options import PROGRESS
from scopeguard.detection.tune.card import before_after
from scopeguard.detection.tune.config import DEFAULT_TARGETS, TuneConfig

_option = functools.partial(config_option, TuneConfig)


@command("train-reader")
def train_reader_command(
    datasets: list[Path] = typer.Argument(
        ..., help="Dataset folders to train on (documents.jsonl + questions.jsonl)."
    ),
    base: str = _option(
        "base",
        help="The reading model: smollm2, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, a .gguf path, a Hugging "
        "Face causal LM, or a tuned reader's folder to train further.",
    ),
    out: Path = typer.Option(..., "--out", help="The run folder; when done, the tuned reader (local:OUT)."),
    evaluate: list[Path] = typer.Option(
        [], "--eval", help="A dataset scored at every validation point but never trained on (repeatable)."
    ),
    epochs: int = _option("epochs", help="Passes over the training examples."),
    max_questions: int | None = typer.Option(
        None,
        "--max-questions",
        help="Training questions in all, shared equally by the datasets (default: all).",
    ),
    lr: float = _option("lr", help="Peak learning rate (AdamW; warm-up, then cosine)."),
    rank: int = _option("rank", help="LoRA rank."),
    alpha: float = _option("alpha", help="LoRA alpha (scale alpha / rank)."),
    targets: str = typer.Option(
        ",".join(DEFAULT_TARGETS),
        "--targets",
        help="Modules to adapt, comma-separated (q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj).",
    ),
    top_layers: int = _option(
        "top_layers",
        help="Adapt only the top N decoder blocks (0: all; fewer: cheaper updates).",
    ),
    adapt: str = _option(
        "adapt",
        help="Where the adapter acts: 'all' tokens, or 'question': from the question on, the documents "
        "read by the bare base once each (several times cheaper; their states shared with the base).",
    ),
    batch: int = _option("batch", help="Examples per optimizer update."),
    dtype: str = _option(
        "dtype",
        help="The base's weights: auto (bfloat16 on CUDA, float32 on the CPU), float32 or bfloat16.",
    ),
    max_tokens: int = _option("max_tokens", help="Longest prompt trained on (longer: left out)."),
    eval_every: int = _option("eval_every", help="Updates between validation points."),
    val_questions: int = _option(
        "val_questions",
        help="Most validation questions per dataset (whole documents).",
    ),
    same_source: list[str] = typer.Option(
        [],
        "--same-source",
        help="NAME=OTHER weighs dataset NAME as part of OTHER (e.g. squad2-train-extra=squad2-train).",
    ),
    seed: int = _option("seed", help="Seed of the split, the draws and the order."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its checkpoint."),
    checkpoint_minutes: float = typer.Option(
        5.0, "--checkpoint-minutes", help="Minutes between checkpoints."
    ),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads for torch (default: torch's)."),
    device: str | None = typer.Option(
        None, "--device", help="cpu, cuda, cuda:1 ... (default: CUDA when present)."
    ),
    progress: bool = PROGRESS,
) -> None:
    """Train a LoRA adapter of the reading model on the verdict of DATASETS; write a tuned reader to --out."""
    from scopeguard.detection.tune.train import train_reader

    sources = same_sources(same_source)
    config = TuneConfig(
        datasets=[str(d) for d in datasets],
        evaluate=[str(d) for d in evaluate],
        base=base,
        rank=rank,
        alpha=alpha,
        targets=[t.strip() for t in targets.split(",") if t.strip()],
        top_layers=top_layers,
        adapt=adapt,
        lr=lr,
        epochs=epochs,
        batch=batch,
        dtype=dtype,
        max_questions=max_questions,
        max_tokens=max_tokens,
        eval_every=eval_every,
        val_questions=val_questions,
        same_source=sources,
        seed=seed,
    )
    logging.getLogger("scopeguard").setLevel(logging.INFO)
    report = train_reader(
        config,
        out,
        resume=resume,
        checkpoint_minutes=checkpoint_minutes,
        device=device,
        threads=threads,
        progress=None if progress else False,
    )
    assert report is not None
    typer.echo(f"{report.updates} updates, {report.examples_seen} examples, {report.seconds / 60:.1f} min")
    for line in before_after(report):
        typer.echo(line)
    typer.echo(f"tuned reader in {out}: use it as --reader local:{out} (llama.cpp) or transformers:{out}")
