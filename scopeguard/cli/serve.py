"""``scopeguard serve``: the guard as an HTTP service (check API and guarded OpenAI proxy)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from scopeguard.cli._app import app, handle_errors


@app.command("serve")
@handle_errors
def serve(
    config_file: Path | None = typer.Option(
        None, "--config", help="TOML or JSON file of settings (a [serve] table or top-level keys)."
    ),
    host: str | None = typer.Option(None, "--host", help="Address to bind [default: 127.0.0.1]."),
    port: int | None = typer.Option(None, "--port", help="Port to bind [default: 8000]."),
    detector: str | None = typer.Option(None, "--detector", help="Detector name [default: default]."),
    policy: str | None = typer.Option(None, "--policy", help="Out-of-scope policy [default: clarify]."),
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
        None, "--deadline", metavar="SECONDS", help="Per-request deadline [default: 30]."
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
        "policy": policy,
        "upstream": upstream,
        "upstream_model": upstream_model,
        "api_key": api_key,
        "deadline": deadline_s,
    }
    config = load_config(config_file, overrides)
    configure_json_logs(logging.INFO)
    logging.getLogger(__name__).info(
        "serving", extra={"host": config.host, "port": config.port, "detector": config.detector}
    )
    run(config)
