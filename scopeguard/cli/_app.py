"""The typer application; each command module registers its commands on ``app`` (:func:`command`).

Exit codes, the same for every command:

- ``0``: done, every item succeeded;
- ``1``: the job ran and wrote its outputs, but some items failed (documents, questions,
  evaluation steps, a check without a verdict); the last line on stderr says how many;
- ``2``: the command could not run: a bad option or input, a missing dependency, an unreachable
  LLM, a run folder of another configuration (one ``error:`` line on stderr; click's own usage
  errors use 2 as well).
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from pydantic import BaseModel

from scopeguard.errors import ScopeGuardError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED_ITEMS = 1
EXIT_USAGE = 2

app = typer.Typer(
    name="scopeguard",
    help="Catch out-of-scope questions before a RAG system hallucinates an answer.",
    epilog="Exit codes: 0 all items succeeded; 1 the job ran but some items failed (stderr says how "
    "many); 2 the command could not run (bad option or input, missing dependency, unreachable LLM).",
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
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper  # type: ignore[return-value]


def command(name: str) -> Callable[[F], F]:
    """Register a function as the command ``name`` of :data:`app`, its errors handled as every
    command's are (:func:`handle_errors`)."""

    def register(fn: F) -> F:
        handled = handle_errors(fn)
        app.command(name)(handled)
        return handled

    return register


def config_default(config: type[BaseModel], field: str) -> Any:
    """The default of a job config's field: the one source of a CLI option's default."""
    return config.model_fields[field].default


def option_flag(param: str) -> str:
    """The command-line flag of the parameter ``param``: ``filter_`` -> ``--filter``, ``max_oos`` ->
    ``--max-oos``."""
    return "--" + param.rstrip("_").replace("_", "-")


def config_option(config: type[BaseModel], field: str, *flags: str, **options: Any) -> Any:
    """A ``typer.Option`` whose default is ``config``'s ``field``'s (:func:`config_default`), named
    ``--field`` (:func:`option_flag`) unless ``flags`` are given (a switch ``--x/--no-x``, or a
    name of its own); ``options`` are typer's (``help``, ``metavar``)."""
    return typer.Option(config_default(config, field), *(flags or (option_flag(field),)), **options)


def option_given(ctx: typer.Context, option: str) -> bool:
    """Whether the parameter ``option`` was set on the command line (or by an environment
    variable), not left at its default: what a preset such as ``--paper`` may override."""
    source = ctx.get_parameter_source(option)
    # compared by name: typer ships its own copy of click's ParameterSource enum
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def same_sources(items: list[str]) -> dict[str, str]:
    """``--same-source NAME=OTHER`` options as a mapping (a :class:`ConfigurationError` for a bad one)."""
    from scopeguard.errors import ConfigurationError

    sources: dict[str, str] = {}
    for item in items:
        name, sep, other = item.partition("=")
        if not sep or not name.strip() or not other.strip():
            raise ConfigurationError(f"--same-source takes NAME=OTHER, got {item!r}")
        sources[name.strip()] = other.strip()
    return sources


def metric_text(value: object, fmt: str = "{:.3f}") -> str:
    """A metric as a table shows it: ``n/a`` when it is undefined (``None`` or NaN), a float by
    ``fmt``, anything else as it prints."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return fmt.format(value) if isinstance(value, float) else str(value)


def exit_if_failed(failed: int, total: int, items: str, hint: str = "") -> None:
    """End a job that wrote its outputs with exit code 1 when ``failed`` of its ``total`` ``items``
    failed, saying so in one line on stderr (``hint``: where to look, or how to retry)."""
    if failed:
        typer.echo(f"{failed} of {total} {items} failed" + (f": {hint}" if hint else ""), err=True)
        raise typer.Exit(EXIT_FAILED_ITEMS)


_COMMAND_MODULES = (
    "check",
    "demo",
    "detectors",
    "train",
    "train_reader",
    "generate",
    "calibrate",
    "evaluate",
    "retrieval",
    "verify",
    "verify_sample",
    "review",
    "agreement",
    "doctor",
    "serve",
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
