"""CLI commands: evaluate (registered on the shared typer app)."""

from scopeguard.cli._app import app  # noqa: F401
