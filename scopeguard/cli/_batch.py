"""The ``--execution`` / ``--poll-interval`` / ``--max-wait`` options of the commands that can run
on the OpenAI Batch API (``generate``, ``evaluate``, ``verify``)."""

from __future__ import annotations

from typing import Literal

import typer

from scopeguard.batch import BatchSettings
from scopeguard.errors import ConfigurationError

__all__ = ["EXECUTION", "MAX_WAIT", "POLL_INTERVAL", "batch_options"]

EXECUTION = typer.Option(
    "online",
    "--execution",
    help="online (requests as they come) or batch (OpenAI Batch API jobs in waves, half the price, "
    "results within the completion window; needs openai: models; resumable).",
)
POLL_INTERVAL = typer.Option(
    BatchSettings.model_fields["poll_interval_s"].default,
    "--poll-interval",
    help="--execution batch: seconds between polls of a running batch.",
)
MAX_WAIT = typer.Option(
    None,
    "--max-wait",
    help="--execution batch: stop waiting for a batch after this many seconds (it stays "
    "submitted; re-run on the same --out to collect it).",
)


def batch_options(
    execution: str, poll_interval: float, max_wait: float | None
) -> tuple[Literal["online", "batch"], BatchSettings]:
    """The checked execution mode and the batch settings of the options."""
    if execution not in ("online", "batch"):
        raise ConfigurationError(f"--execution must be 'online' or 'batch', got {execution!r}")
    mode: Literal["online", "batch"] = "batch" if execution == "batch" else "online"
    return mode, BatchSettings(poll_interval_s=poll_interval, max_wait_s=max_wait)
