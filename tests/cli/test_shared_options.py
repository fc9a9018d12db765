"""The options and helpers several commands share: one definition each, the same on every command."""

from __future__ import annotations

import math

import pytest
import typer.main

from scopeguard.cli import app
from scopeguard.cli._app import metric_text
from scopeguard.cli._options import QUERY_LOG_HELP, refuse_renamed_llm
from scopeguard.errors import ConfigurationError
from scopeguard.retrieval.registry import DEFAULT_RETRIEVER


def _option(command: str, name: str) -> typer.core.TyperOption:
    params = typer.main.get_command(app).commands[command].params  # type: ignore[attr-defined]
    return next(p for p in params if p.name == name)


@pytest.mark.parametrize("command", ["calibrate", "generate"])
def test_the_query_log_options_are_one_definition(command: str) -> None:
    questions, retriever = _option(command, "questions"), _option(command, "retriever")
    assert questions.opts == ["--questions"] and questions.metavar == "LOG"
    assert str(questions.help).startswith(QUERY_LOG_HELP + ": ")
    assert retriever.opts == ["--retriever"] and retriever.default == DEFAULT_RETRIEVER
    assert str(retriever.help).startswith("With --questions: the retriever that ")


@pytest.mark.parametrize(
    "command", ["calibrate", "evaluate", "generate", "eval-detector", "preread", "train-reader"]
)
def test_progress_is_the_same_option_everywhere(command: str) -> None:
    progress = _option(command, "progress")
    assert progress.opts == ["--progress"] and progress.secondary_opts == ["--no-progress"]
    assert progress.default is True


def test_the_renamed_llm_option_says_what_replaced_it() -> None:
    refuse_renamed_llm("preread", None)
    with pytest.raises(ConfigurationError, match=r"^preread takes the reading model as --reader SPEC"):
        refuse_renamed_llm("preread", "local")
    assert _option("preread", "llm").hidden and _option("train-detector", "llm").hidden


def test_metric_text() -> None:
    values = (None, math.nan, 0.12345, 7, "all")
    assert [metric_text(v) for v in values] == ["n/a", "n/a", "0.123", "7", "all"]
    assert metric_text(0.5, "{:.1%}") == "50.0%"
