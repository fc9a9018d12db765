"""``scopeguard check``: one question against one or more document files."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from scopeguard.cli._app import app, exit_if_failed, handle_errors
from scopeguard.errors import InputError
from scopeguard.types import Document, Verdict, validate_question


def read_document(path: Path) -> Document:
    """Read a text document from ``path`` with a clear error when it is missing or unreadable."""
    if not path.exists():
        raise InputError(f"document file not found: {path}")
    if not path.is_file():
        raise InputError(f"document path is not a file: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"document file is not UTF-8 text: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read document file {path}: {exc.strerror}") from None
    if not text.strip():
        raise InputError(f"document file is empty: {path}")
    return Document(text=text, id=path.name)


@app.command("check")
@handle_errors
def check(
    question: str = typer.Option(..., "--question", "-q", help="The user's question."),
    document: list[Path] = typer.Option(
        ..., "--document", "-d", help="A retrieved document (text file); repeat for several."
    ),
    detector: str = typer.Option("default", "--detector", help="Detector name (see `scopeguard detectors`)."),
    model: str | None = typer.Option(None, "--model", help="Trained head directory for nli/probe."),
    llm: str | None = typer.Option(
        None, "--llm", help="LLM spec for the judge detector, e.g. local or openai:gpt-4o-mini."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Decide whether QUESTION is in scope for the given documents and print the verdict.

    Exits 1 when the verdict is unknown, 2 when there is none (bad question or document file, the
    detector failed).
    """
    # Input is checked before any detector (and its model) is loaded.
    question = validate_question(question)
    docs = [read_document(p) for p in document]
    from scopeguard.detectors import get_detector

    kwargs: dict[str, object] = {}
    if model is not None:
        kwargs["model"] = model
    if llm is not None:
        kwargs["llm"] = llm
    verdict = get_detector(detector, **kwargs).detect(question, docs)
    if as_json:
        typer.echo(json.dumps(verdict.model_dump(mode="json"), ensure_ascii=False))
        _exit_if_undecided(verdict)
        return
    score = "n/a" if verdict.score is None else f"{verdict.score:.3f}"
    typer.echo(f"label:    {verdict.label}")
    typer.echo(f"score:    {score}  (probability out of scope)")
    typer.echo(f"detector: {verdict.detector}  ({verdict.latency_ms:.1f} ms, {verdict.llm_calls} LLM calls)")
    if verdict.uncovered:
        typer.echo("not covered by the documents: " + "; ".join(verdict.uncovered))
    if verdict.rationale:
        typer.echo(f"rationale: {verdict.rationale}")
    _exit_if_undecided(verdict)


def _exit_if_undecided(verdict: Verdict) -> None:
    """Exit 1 when the check gave no verdict (label ``unknown``, e.g. the detector's LLM failed)."""
    reason = verdict.error or "the detector could not decide (label unknown)"
    exit_if_failed(int(verdict.label == "unknown"), 1, "checks", reason)


@app.command("detectors")
def list_detectors() -> None:
    """List the registered detector names."""
    from scopeguard.detectors import available_detectors

    for name in available_detectors():
        typer.echo(name)
