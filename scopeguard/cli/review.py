"""``scopeguard review``: the labelling page (``scopeguard agreement`` lives in :mod:`.agreement`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import typer

from scopeguard.cli._app import command
from scopeguard.review.store import DEFAULT_ANNOTATOR


def _calibration_callables(folder: Path) -> dict[str, Any]:
    """The calibration package's running estimate (``label_estimate``) and profile update
    (``update_profile``), each bound to ``folder``; ``None`` for one this scopeguard lacks."""
    import scopeguard.calibration as calibration

    label_estimate = getattr(calibration, "label_estimate", None)
    update_profile = getattr(calibration, "update_profile", None)
    if label_estimate is None:
        typer.echo("note: no running estimate (scopeguard.calibration has no label_estimate)", err=True)
    if update_profile is None:
        typer.echo(
            "note: the profile is not updated (scopeguard.calibration has no update_profile)", err=True
        )
    return {
        "estimate": None if label_estimate is None else functools.partial(label_estimate, folder),
        "on_complete": None if update_profile is None else functools.partial(update_profile, folder),
    }


@command("review")
def review(
    folder: Path = typer.Argument(
        ...,
        help="A dataset folder (documents.jsonl + questions.jsonl), or a calibration folder "
        "(to_label.jsonl, from scopeguard calibrate --select).",
        metavar="DIR",
    ),
    annotator: str = typer.Option(
        DEFAULT_ANNOTATOR,
        "--annotator",
        help="Your name; labels go to DIR/reviews/NAME.jsonl (dataset folders only).",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (local only by default)."),
    port: int = typer.Option(8765, "--port", help="Port (0 picks a free one)."),
) -> None:
    """Serve a local page to label questions; the folder says which kind.

    A dataset folder: label generated questions (scope, and defusion where the run has a
    response); keys i / o / u, y / n, j / k; labels go to DIR/reviews/NAME.jsonl.

    A calibration folder (DIR/to_label.jsonl): label the questions the calibration chose, one at
    a time with the chunks the guard read; keys i (in scope) / o (out of scope) / u (unsure),
    b or Backspace (back); labels go to DIR/labels.jsonl, the running estimate shows after each
    label, and the profile is updated when every question has a label.
    """
    from scopeguard.review._calibration import is_calibration_folder
    from scopeguard.review.server import make_server

    calibration = is_calibration_folder(folder)
    hooks = _calibration_callables(folder) if calibration else {}
    server = make_server(folder, annotator=annotator, host=host, port=port, **hooks)
    h, p = str(server.server_address[0]), int(server.server_address[1])
    what = (
        f"Labelling the questions chosen in {folder}" if calibration else f"Reviewing {folder} as {annotator}"
    )
    typer.echo(f"{what}: open http://{h}:{p}/  (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
