"""CLI: ``scopeguard retrieval-study`` (ELOQ section 4.3 on your own dataset)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from scopeguard.cli._app import command, config_default, config_option
from scopeguard.errors import InputError
from scopeguard.retrieval.study import StudyConfig


def _joined(field: str) -> str:
    return ",".join(str(v) for v in config_default(StudyConfig, field))


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--k must be comma-separated positive integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise InputError(f"--k must be comma-separated positive integers, got {text!r}")
    return values


@command("retrieval-study")
def retrieval_study(
    dataset_dir: Path = typer.Argument(..., help="Dataset folder (documents.jsonl + questions.jsonl)."),
    retrievers: str = typer.Option(
        _joined("retrievers"),
        "--retrievers",
        "-r",
        help="Comma-separated: bm25, bm25s, sbert, minilm, bge, stella, linq, dense:NAME_OR_PATH.",
    ),
    k: str = typer.Option(_joined("ks"), "--k", help="Comma-separated k values for Recall@k."),
    out: Path = typer.Option(Path("retrieval-study"), "--out", "-o", help="Report folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as one JSON object."),
    corpus: Path | None = typer.Option(
        None, "--corpus", help="A documents.jsonl (or folder) to search instead of the dataset's documents."
    ),
    depth: int = config_option(StudyConfig, "depth", help="Documents retrieved per question (MRR@depth)."),
    bootstrap: int = config_option(
        StudyConfig, "n_bootstrap", "--bootstrap", help="Bootstrap resamples for the intervals."
    ),
    seed: int = config_option(StudyConfig, "seed", help="Bootstrap seed."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write recall_at_k.png."),
) -> None:
    """Does each question retrieve the document it was written from? Recall@k and MRR per retriever.

    Exits 0 or 2 (could not run): it has no per-item failures, a question whose document is not in
    the corpus counts as a miss (and is reported on stderr).
    """
    from scopeguard.retrieval.report import markdown_table
    from scopeguard.retrieval.study import study

    config = StudyConfig(
        dataset=str(dataset_dir),
        retrievers=tuple(r.strip() for r in retrievers.split(",") if r.strip()),
        corpus=str(corpus) if corpus is not None else None,
        ks=tuple(_ints(k)),
        depth=depth,
        n_bootstrap=bootstrap,
        seed=seed,
    )
    done = study(config, out, plot=plot)
    result, paths = done.result, done.files
    if as_json:
        typer.echo(json.dumps(result.summary(), indent=2))
    else:
        typer.echo("Out-of-scope questions (ELOQ Table 6):\n" + markdown_table(result, "out_of_scope"))
        typer.echo("")
        typer.echo("In-scope questions:\n" + markdown_table(result, "in_scope"))
        typer.echo("")
        typer.echo("wrote " + ", ".join(str(p) for p in paths.values()), err=True)
