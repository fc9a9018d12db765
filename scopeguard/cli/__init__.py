"""The ``scopeguard`` command line (typer). Commands live in one module per job; no logic here."""

from scopeguard.cli._app import app, main

__all__ = ["app", "main"]
