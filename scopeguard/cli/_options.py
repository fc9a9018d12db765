"""The options that several commands share, each defined once.

An option object here is the default of a command's parameter (``progress: bool = PROGRESS``), as
:mod:`scopeguard.cli._batch` does for the Batch API options; an option whose help names what the
command does with it is made by a function (``query_log_option``, ``log_retriever_option``).
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import BaseModel

from scopeguard.cli._app import config_option
from scopeguard.errors import ConfigurationError

__all__ = [
    "AS_JSON",
    "CALIBRATION",
    "CALIBRATION_HELP",
    "JUDGE_LLM",
    "LLM_HELP",
    "PROGRESS",
    "QUERY_LOG_HELP",
    "READER",
    "READER_HELP",
    "RENAMED_LLM",
    "log_retriever_option",
    "query_log_option",
    "refuse_renamed_llm",
]

CALIBRATION_HELP = (
    "A calibration profile (scopeguard calibrate's folder, or its profile.json): the label comes from "
    "its threshold and a score in its hedge band is marked hedge. One made for another detector is "
    "refused."
)
READER_HELP = (
    "The reading model of a detector that reads (default, logprob): local, local:NAME_OR_FOLDER (a GGUF "
    "or a tuned reader from train-reader), transformers:NAME or openai:MODEL. Default: the model its "
    "head was fitted on."
)
LLM_HELP = "The judge detector's LLM spec, e.g. local or openai:gpt-4o-mini (a reading model is --reader)."
QUERY_LOG_HELP = (
    "A query log (JSON Lines or CSV with a 'question' field; optional id, doc_ids, documents, label)"
)
"""What ``--questions LOG`` reads (:func:`scopeguard.querylog.read_query_log`); the command says the rest."""

PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show progress bars on a terminal.")
AS_JSON = typer.Option(False, "--json", help="Print one JSON object.")
READER = typer.Option(None, "--reader", metavar="SPEC", help=READER_HELP)
READ_MODE = typer.Option(
    None,
    "--read",
    metavar="MODE",
    help="How the default detector reads several documents: passages (each on its own; the default) "
    "or set (the question read once against them all: faster on many pre-read chunks, ranks a little "
    "worse; see docs/concepts/reading.md).",
)
JUDGE_LLM = typer.Option(None, "--llm", help=LLM_HELP)
CALIBRATION = typer.Option(None, "--calibration", metavar="DIR", help=CALIBRATION_HELP)
RENAMED_LLM = typer.Option(None, "--llm", hidden=True)
"""The reading model's old option name, kept hidden to say so: see :func:`refuse_renamed_llm`."""


def refuse_renamed_llm(command: str, llm: str | None) -> None:
    """A :class:`ConfigurationError` when ``--llm`` (:data:`RENAMED_LLM`) was given to ``command``,
    which takes its reading model as ``--reader SPEC``."""
    if llm is not None:
        raise ConfigurationError(f"{command} takes the reading model as --reader SPEC, not --llm (renamed)")


def query_log_option(use: str) -> Any:
    """``--questions LOG``: a query log, and what the command does with its questions (``use``)."""
    return typer.Option(None, "--questions", metavar="LOG", help=f"{QUERY_LOG_HELP}: {use}")


def log_retriever_option(config: type[BaseModel], use: str) -> Any:
    """``--retriever`` of a command's ``--questions``: the retriever that ``use``; its default is
    the ``retriever`` field's of the command's ``config``."""
    return config_option(config, "retriever", help=f"With --questions: the retriever that {use}.")
