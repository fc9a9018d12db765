"""``scopeguard verify-sample``: draw N verdicts per class of a verification run to check by hand."""

from __future__ import annotations

from pathlib import Path

import typer

from scopeguard.cli._app import command


@command("verify-sample")
def verify_sample(
    run: Path = typer.Argument(..., help="A verification run folder (or its results.jsonl)."),
    out: Path = typer.Option(
        ..., "--out", help="Sample file: .csv, else JSONL (a 'correct' column to fill)."
    ),
    per_class: int = typer.Option(100, "--per-class", help="Results drawn per class (the paper: 100)."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the draw."),
) -> None:
    """Draw up to N results of each predicted class (Yes / No / Not Related) for the manual check of
    Huo et al.'s Table 2. The same run and seed give the same sample."""
    from scopeguard.verification.report import read_results
    from scopeguard.verification.sampling import sample_for_check, write_check_sample

    items = sample_for_check(read_results(run), per_class=per_class, seed=seed)
    path = write_check_sample(items, out)
    counts: dict[str, int] = {}
    for item in items:
        counts[item.predicted] = counts.get(item.predicted, 0) + 1
    drawn = ", ".join(f"{name} {n}" for name, n in counts.items()) or "nothing"
    typer.echo(f"{len(items)} results ({drawn}) written to {path}")
