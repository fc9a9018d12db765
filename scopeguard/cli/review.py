"""``scopeguard review``: the labelling page (``scopeguard agreement`` lives in :mod:`.agreement`)."""

from __future__ import annotations

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
