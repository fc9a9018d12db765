"""The typer application; each command module registers its commands on ``app``."""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from scopeguard.errors import ScopeGuardError

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="scopeguard",
    help="Catch out-of-scope questions before a RAG system hallucinates an answer.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def handle_errors(fn: F) -> F:
    """Turn a :class:`ScopeGuardError` into one clear line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ScopeGuardError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


_COMMAND_MODULES = (
    "check",
    "demo",
    "detectors",
    "train",
    "generate",
    "evaluate",
    "retrieval",
    "verify",
    "review",
)


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress to stderr.")) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


for _name in _COMMAND_MODULES:
    importlib.import_module(f"scopeguard.cli.{_name}")


def main() -> None:
    app()
