"""``scopeguard agreement``: people against people, and the defusion judge against people.

One command, two reports, told apart by what it is given:

- an evaluation run folder (``run.json``), a review label file, or ``--run RUN``: AutoDefuseEval
  against the reviewers' ``defused`` labels (:func:`scopeguard.evaluation.defusion_agreement`,
  ELOQ section 3.4, Table 3): the judge's accuracy and kappa per reviewer and pooled, the people's
  pairwise kappa, and the group agreement accuracy. Exits 1 when some labels could not be compared;
- a reviewed dataset folder: the scope labels' kappa per annotator pair, the generator's accuracy
  and the disagreements to resolve (:func:`scopeguard.review.agreement_report`).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from scopeguard.cli._app import command, exit_if_failed, metric_text
from scopeguard.cli._options import AS_JSON
from scopeguard.errors import ConfigurationError


def _row(*cells: object) -> str:
    """A Markdown table row; metrics as :func:`metric_text` shows them."""
    return "| " + " | ".join(metric_text(cell) for cell in cells) + " |"


def _scope_agreement(dataset_dir: Path, resolver: str | None, export: Path | None, as_json: bool) -> None:
    from scopeguard.review.agreement import agreement_report, export_resolved

    report = agreement_report(dataset_dir, resolver=resolver)
    if export is not None:
        export_resolved(dataset_dir, export, report)
    if as_json:
        typer.echo(report.model_dump_json())
        return
    typer.echo("| annotator A | annotator B | n | kappa | agreement |\n|---|---|---|---|---|")
    for p in report.pairs:
        typer.echo(_row(p.a, p.b, p.n, p.kappa, p.observed_agreement))
    typer.echo("\nGenerator label accuracy:")
    for name, acc in report.generator_accuracy.items():
        typer.echo(f"  vs {name}: {metric_text(acc)}")
    typer.echo(f"\n{report.n_resolved} resolved, {len(report.disagreements)} disagreements to resolve")
    for d in report.disagreements:
        typer.echo(f"  {d['question_id']}: {json.dumps(d['labels'])}  {d['question']}")
    if export is not None:
        typer.echo(f"resolved labels written to {export}")


def _defusion_agreement(run: Path, reviews: Path | None, prompt: str | None, as_json: bool) -> None:
    from scopeguard.evaluation.agreement import defusion_agreement

    report = defusion_agreement(run, reviews, prompt=prompt)
    if as_json:
        typer.echo(report.model_dump_json())
    else:
        typer.echo(f"Defusion judge of {report.run} against {len(report.reviewers)} reviewer(s):\n")
        typer.echo("| reviewer | n | judge accuracy | judge kappa |\n|---|---|---|---|")
        for r in report.by_reviewer:
            typer.echo(_row(r.reviewer, r.n, r.judge_accuracy, r.judge_kappa))
        typer.echo(_row("all labels", report.compared, report.judge_accuracy, report.judge_kappa))
        typer.echo(
            f"\nGroup agreement accuracy: {metric_text(report.group_agreement_accuracy)} "
            f"(n={report.group_agreed} responses on which several reviewers agree)"
        )
        if report.pairs:
            typer.echo("\n| reviewer A | reviewer B | n | kappa | agreement |\n|---|---|---|---|---|")
            for p in report.pairs:
                typer.echo(_row(p.a, p.b, p.n, p.kappa, p.observed_agreement))
        for s in report.skipped:
            typer.echo(f"  skipped {s.reviewer} / {s.question_id}: {s.reason}")
    exit_if_failed(
        len(report.skipped), report.labels, "human labels", "they could not be compared with the judge"
    )


@command("agreement")
def agreement(
    target: Path = typer.Argument(
        ...,
        help="An evaluation run folder, a review label file (DATASET/reviews/NAME.jsonl), "
        "or a reviewed dataset folder.",
    ),
    run: Path | None = typer.Option(
        None, "--run", help="Evaluation run whose defusion judge to compare with a label file or dataset."
    ),
    reviews: Path | None = typer.Option(
        None, "--reviews", help="With a run folder: the labels (default RUN/reviews or DATASET/reviews)."
    ),
    prompt: str | None = typer.Option(None, "--prompt", help="Compare only this RAG prompt's responses."),
    resolver: str | None = typer.Option(
        None, "--resolver", help="Scope labels: the annotator whose labels settle disagreements."
    ),
    export: Path | None = typer.Option(
        None, "--export", help="Scope labels: write resolved labels here (canonical format)."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """The defusion judge against reviewers (a run), or reviewers against each other (a dataset)."""
    if (target / "run.json").is_file():
        _defusion_agreement(target, reviews, prompt, as_json)
    elif run is not None:
        _defusion_agreement(run, target, prompt, as_json)
    elif target.is_file():
        raise ConfigurationError(
            f"{target} is a label file: name the evaluation run whose judge to compare with --run RUN"
        )
    else:
        _scope_agreement(target, resolver, export, as_json)
