"""``scopeguard serve``: the guard as an HTTP service (check API and guarded OpenAI proxy)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from scopeguard.cli._app import command, config_default
from scopeguard.cli._options import READ_MODE, READER
from scopeguard.serve._config import ServeConfig


def _default(field: str) -> str:
    """The help text's default: the config model's (the options themselves default to None, so
    that the config file and the environment can set them)."""
    return f"(default: {config_default(ServeConfig, field)})"


@command("serve")
def serve(
    config_file: Path | None = typer.Option(
        None, "--config", help="TOML or JSON file of settings (a 'serve' table, or top-level keys)."
    ),
    host: str | None = typer.Option(None, "--host", help=f"Address to bind {_default('host')}."),
    port: int | None = typer.Option(None, "--port", help=f"Port to bind {_default('port')}."),
    detector: str | None = typer.Option(None, "--detector", help=f"Detector name {_default('detector')}."),
    reader: str | None = READER,
    read: str | None = READ_MODE,
    policy: str | None = typer.Option(None, "--policy", help=f"Out-of-scope policy {_default('policy')}."),
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        metavar="DIR",
        help="A calibration profile (scopeguard calibrate's folder): the detector's threshold and "
        "hedge band; /readyz names it. One made for another detector stops the start.",
    ),
    upstream: str | None = typer.Option(
        None, "--upstream", metavar="BASE_URL", help="OpenAI-compatible LLM the proxy forwards to (…/v1)."
    ),
    upstream_model: str | None = typer.Option(None, "--upstream-model", help="Model name sent upstream."),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        help="Require `Authorization: Bearer KEY` (needed off loopback).",
        show_default=False,
    ),
    deadline_s: float | None = typer.Option(
        None, "--deadline", metavar="SECONDS", help=f"Per-request deadline in seconds {_default('deadline')}."
    ),
    preread: Path | None = typer.Option(
        None,
        "--preread",
        metavar="CORPUS",
        help="Pre-read this corpus (dataset folder, JSONL, folder of .txt/.md) in the background at "
        "start, between checks; /readyz and /metrics report its progress.",
    ),
    speculative: bool | None = typer.Option(
        None,
        "--speculative/--no-speculative",
        help="Start the upstream answer beside the check and hold it until the verdict (dropped when "
        f"out of scope; /metrics counts what dropped answers cost) {_default('speculative')}.",
        show_default=False,
    ),
) -> None:
    """Serve the guard over HTTP: /v1/check, /v1/answer, /v1/chat/completions (guarded proxy), /metrics.

    Every option is also a key of the --config file and a SCOPEGUARD_<OPTION> environment variable
    (SCOPEGUARD_API_KEY, SCOPEGUARD_UPSTREAM, ...); the command line wins, then the environment.
    """
    from scopeguard.serve import load_config, run
    from scopeguard.serve._telemetry import configure_json_logs

    overrides = {
        "host": host,
        "port": port,
        "detector": detector,
        "reader": reader,
        "read": read,
        "policy": policy,
        "calibration": calibration,
        "upstream": upstream,
        "upstream_model": upstream_model,
        "api_key": api_key,
        "deadline": deadline_s,
        "preread": preread,
        "speculative": speculative,
    }
    config = load_config(config_file, overrides)
    configure_json_logs(logging.INFO)
    where = None if config.calibration is None else str(config.calibration)
    logging.getLogger(__name__).info(
        "serving",
        extra={"host": config.host, "port": config.port, "detector": config.detector, "calibration": where},
    )
    run(config)
