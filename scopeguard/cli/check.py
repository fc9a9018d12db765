"""``scopeguard check``: one question against one or more document files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scopeguard.cli._app import command, exit_if_failed
from scopeguard.cli._options import AS_JSON, CALIBRATION, JUDGE_LLM, READ_MODE, READER
from scopeguard.errors import InputError
from scopeguard.types import Document, Verdict, validate_question

if TYPE_CHECKING:
    from scopeguard.detection.detectors.base import Detector
    from scopeguard.detection.profile import CalibrationProfile


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


def load_calibration(location: Path) -> tuple[CalibrationProfile, str]:
    """The calibration profile at ``location`` (a folder or its ``profile.json``) and the line that
    names it: its file and its summary."""
    from scopeguard.detection.profile import PROFILE_FILE, load_profile

    profile = load_profile(location)
    path = location / PROFILE_FILE if location.is_dir() else location
    return profile, f"{path}: {profile.summary()}"


def calibrated_detector(
    detector: str,
    *,
    calibration: Path | None,
    model: object = None,
    llm: str | None = None,
    reader: str | None = None,
    read: str | None = None,
) -> tuple[Detector, CalibrationProfile | None, str]:
    """The detector named ``detector``, built with the options --model, --llm, --reader and --read give it
    (:func:`detector_options`) and the profile at ``calibration``; that profile (``None`` without
    one) and the line that names it (``""``)."""
    from scopeguard.detection.detectors import get_detector
    from scopeguard.detection.detectors.registry import detector_options

    profile, named = load_calibration(calibration) if calibration is not None else (None, "")
    options = detector_options(detector, model=model, llm=llm, reader=reader, read=read)
    return get_detector(detector, calibration=profile, **options), profile, named


@command("check")
def check(
    question: str = typer.Option(..., "--question", "-q", help="The user's question."),
    document: list[Path] = typer.Option(
        ..., "--document", "-d", help="A retrieved document (text file); repeat for several."
    ),
    detector: str = typer.Option("default", "--detector", help="Detector name (see `scopeguard detectors`)."),
    model: str | None = typer.Option(None, "--model", help="Trained head directory for nli/probe."),
    reader: str | None = READER,
    read: str | None = READ_MODE,
    llm: str | None = JUDGE_LLM,
    calibration: Path | None = CALIBRATION,
    as_json: bool = AS_JSON,
    deadline_s: float | None = typer.Option(
        None,
        "--deadline",
        metavar="SECONDS",
        help="Bound the whole check, every LLM call and retry included; past it the check fails.",
    ),
) -> None:
    """Decide whether QUESTION is in scope for the given documents and print the verdict.

    Exits 1 when the verdict is unknown, 2 when there is none (bad input or option, detector error,
    a --calibration profile made for another detector). Running out of --deadline is an LLM failure:
    an unknown verdict or a detector error.
    """
    # Input is checked before any detector (and its model) is loaded.
    question = validate_question(question)
    if deadline_s is not None and not (math.isfinite(deadline_s) and deadline_s > 0):
        raise InputError(f"--deadline must be a positive number of seconds, got {deadline_s:g}")
    docs = [read_document(p) for p in document]
    from scopeguard.llm.deadline import deadline

    built, _, named = calibrated_detector(
        detector, calibration=calibration, model=model, llm=llm, reader=reader, read=read
    )
    with deadline(deadline_s):
        verdict = built.detect(question, docs)
    if as_json:
        if named:
            typer.echo(f"calibration: {named}", err=True)
        typer.echo(json.dumps(verdict.model_dump(mode="json"), ensure_ascii=False))
        _exit_if_undecided(verdict)
        return
    score = "n/a" if verdict.score is None else f"{verdict.score:.3f}"
    hedge = "  (hedge: in scope, answer with a caveat)" if verdict.hedge else ""
    typer.echo(f"label:    {verdict.label}{hedge}")
    typer.echo(f"score:    {score}  (probability out of scope)")
    cost = f"({verdict.latency_ms:.1f} ms, {verdict.llm_calls} LLM calls)"
    typer.echo(f"detector: {_describe_detector(detector, built, verdict)}  {cost}")
    if named:
        typer.echo(f"profile:  {named}")
    if verdict.uncovered:
        typer.echo("not covered by the documents: " + "; ".join(verdict.uncovered))
    if verdict.rationale:
        typer.echo(f"rationale: {verdict.rationale}")
    _exit_if_undecided(verdict)


def _stages(detector: Any) -> tuple[str, ...]:
    """The stage names of a multi-stage detector: its ``stages``, or a cascade's two stages."""
    stages = getattr(detector, "stages", None)
    if stages:
        return tuple(str(s) for s in stages)
    first, second = getattr(detector, "first", None), getattr(detector, "second", None)
    if first is not None and second is not None:
        return (str(getattr(first, "name", "?")), str(getattr(second, "name", "?")))
    return ()


def _describe_detector(name: str, detector: Any, verdict: Verdict) -> str:
    """The detector as the user named it, with its stages and the one that decided.

    ``default (fast -> logprob; decided by fast)`` for a detector with stages (``stages``, or a
    cascade's ``first`` and ``second``); ``default (decided by logprob)`` for a verdict naming its
    stage without the detector declaring them; ``default (fast)`` when the name stands for a
    detector of another name; just ``lexical`` otherwise.
    """
    stages = _stages(detector)
    decided = verdict.stage
    parts = []
    if len(stages) > 1:
        if not decided:  # a cascade: its verdict does not name the stage
            decided = stages[-1] if verdict.escalated and verdict.error is None else stages[0]
        failed = f", {stages[-1]} failed" if verdict.escalated and decided == stages[0] else ""
        parts += [" -> ".join(stages), f"decided by {decided}{failed}"]
    elif decided and decided != name:
        parts.append(f"decided by {decided}")
    elif verdict.detector and verdict.detector != name:
        parts.append(verdict.detector)
    return f"{name} ({'; '.join(parts)})" if parts else name


def _exit_if_undecided(verdict: Verdict) -> None:
    """Exit 1 when the check gave no verdict (label ``unknown``, e.g. the detector's LLM failed)."""
    reason = verdict.error or "the detector could not decide (label unknown)"
    exit_if_failed(int(verdict.label == "unknown"), 1, "checks", reason)


@command("detectors")
def list_detectors() -> None:
    """List the registered detector names."""
    from scopeguard.detection.detectors import available_detectors

    for name in available_detectors():
        typer.echo(name)
