"""``scopeguard review`` (the labelling page) and ``scopeguard agreement`` (kappa, resolution)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from scopeguard.cli._app import app, handle_errors


@app.command("review")
@handle_errors
def review(
    dataset_dir: Path = typer.Argument(..., help="A dataset folder (documents.jsonl + questions.jsonl)."),
    annotator: str = typer.Option(
        "annotator1", "--annotator", help="Your name; labels go to DIR/reviews/NAME.jsonl."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (local only by default)."),
    port: int = typer.Option(8765, "--port", help="Port (0 picks a free one)."),
) -> None:
    """Serve a local page to label generated questions (keys: i / o / u, y / n, j / k)."""
    from scopeguard.review.server import make_server

    server = make_server(dataset_dir, annotator=annotator, host=host, port=port)
    h, p = str(server.server_address[0]), int(server.server_address[1])
    typer.echo(f"Reviewing {dataset_dir} as {annotator}: open http://{h}:{p}/  (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3f}"


@app.command("agreement")
@handle_errors
def agreement(
    dataset_dir: Path = typer.Argument(..., help="A reviewed dataset folder."),
    resolver: str | None = typer.Option(
        None, "--resolver", help="Annotator whose labels settle disagreements."
    ),
    export: Path | None = typer.Option(
        None, "--export", help="Write resolved labels here (canonical format)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Cohen's kappa per annotator pair, generator accuracy, and the disagreements to resolve."""
    from scopeguard.review.agreement import agreement_report, export_resolved

    report = agreement_report(dataset_dir, resolver=resolver)
    if export is not None:
        export_resolved(dataset_dir, export, report)
    if as_json:
        typer.echo(report.model_dump_json())
        return
    typer.echo("| annotator A | annotator B | n | kappa | agreement |\n|---|---|---|---|---|")
    for p in report.pairs:
        typer.echo(f"| {p.a} | {p.b} | {p.n} | {_fmt(p.kappa)} | {_fmt(p.observed_agreement)} |")
    typer.echo("\nGenerator label accuracy:")
    for name, acc in report.generator_accuracy.items():
        typer.echo(f"  vs {name}: {_fmt(acc)}")
    typer.echo(f"\n{report.n_resolved} resolved, {len(report.disagreements)} disagreements to resolve")
    for d in report.disagreements:
        typer.echo(f"  {d['question_id']}: {json.dumps(d['labels'])}  {d['question']}")
    if export is not None:
        typer.echo(f"resolved labels written to {export}")
