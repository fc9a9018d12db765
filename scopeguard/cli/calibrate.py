"""``scopeguard calibrate``: a detector's threshold for a false-refusal budget on the user's corpus.

A thin layer over :func:`scopeguard.calibration.run_calibration`; every option's default is the
:class:`~scopeguard.calibration.CalibrationConfig` field's.
"""

from __future__ import annotations

import functools
from pathlib import Path

import typer

from scopeguard.calibration import CalibrationConfig
from scopeguard.cli._app import command, config_option, exit_if_failed
from scopeguard.cli._options import PROGRESS, READ_MODE, READER, log_retriever_option, query_log_option

_option = functools.partial(config_option, CalibrationConfig)


@command("calibrate")
def calibrate_command(
    corpus: Path = typer.Argument(
        ...,
        help="The documents: a documents.jsonl file, a dataset folder (its questions are read only "
        "when it is also given to --labelled) or a folder of .txt/.md files.",
    ),
    out: Path = typer.Option(
        ..., "--out", help="Output folder (profile.json, report.md); re-run on it to resume."
    ),
    max_false_refusals: float = _option(
        "budget",
        "--max-false-refusals",
        help="The budget B: at most this share of answerable questions is refused, in (0, 0.5].",
    ),
    hedge_budget: float | None = _option(
        "hedge_budget",
        help="At most this share of answerable questions is refused or answered with a caveat; "
        "between the two thresholds the guard hedges (default: min(2 B, 0.5)).",
    ),
    hedge: bool = _option("hedge", "--hedge/--no-hedge", help="Choose a hedge band."),
    detector: str = typer.Option("default", "--detector", "-d", help="The detector to calibrate."),
    reader: str | None = READER,
    read: str | None = READ_MODE,
    sample: int = _option("sample", help="Documents drawn from the corpus to generate questions on."),
    oos_sample: int = _option(
        "oos_sample",
        help="Of those, the documents that also get out-of-scope questions (they measure what the "
        "threshold catches and cost most of the time); the others get in-scope questions alone.",
    ),
    seed: int = _option("seed", help="Seed of the draw."),
    min_words: int = _option(
        "min_words",
        help="Passages shorter than this are joined with their neighbours of the same source "
        "(source, title, topic, url field) to generate on.",
    ),
    llm: str | None = typer.Option(
        None,
        "--llm",
        help="LLM spec that writes the questions (default: the one scopeguard generate uses).",
    ),
    generation: Path | None = _option(
        "generation",
        help="A finished scopeguard generate folder: its questions are read instead of generating.",
    ),
    labelled: list[Path] = typer.Option(
        [],
        "--labelled",
        help="A dataset folder of questions labelled by people, read instead of generated ones (repeatable).",
    ),
    also_generate: bool = _option(
        "also_generate", help="With --labelled or --questions: read generated questions as well."
    ),
    generated_shift: float | None = _option(
        "generated_shift",
        help="Logits added to generated in-scope questions' scores before the threshold is chosen: "
        "they are easier than people's (default: the shift learned for the read mode, 0.58 passage by "
        "passage, 0.25 with --read set; 0: none, for questions generated from the documents too, such as "
        "a synthetic test set; labelled questions are read as they are).",
    ),
    rephrase: bool = _option(
        "rephrase",
        "--rephrase/--no-rephrase",
        help="Put generated in-scope questions in a reader's own words before reading them (one short "
        "call of the writer each).",
    ),
    questions: Path | None = query_log_option(
        "the questions your users asked, each read against the chunks it got (or the top --k)."
    ),
    k: int = _option("k", help="With --questions: chunks retrieved for a logged question that names none."),
    retriever: str = log_retriever_option(CalibrationConfig, "finds those chunks in CORPUS"),
    select: int | None = _option(
        "select",
        metavar="N",
        help="With --questions: choose N logged questions for a person to label (OUT/to_label.jsonl; "
        "label them with scopeguard review OUT, then re-run).",
    ),
    progress: bool = PROGRESS,
) -> None:
    """Choose a detector's threshold on your corpus so that it refuses at most a budget of
    answerable questions; write DIR/profile.json (for Guard(calibration=DIR)) and a report card.

    Exits 1 when some questions could not be read or some documents failed in generation (the
    profile is written from the rest; re-run on the same --out to retry), 2 when it could not run
    (including too few questions for the budget).
    """
    from scopeguard.calibration import run_calibration

    run = run_calibration(
        corpus,
        out,
        detector=detector,
        llm=llm,
        reader=reader,
        read=read,
        progress=None if progress else False,
        budget=max_false_refusals,
        hedge_budget=hedge_budget,
        hedge=hedge,
        sample=sample,
        oos_sample=oos_sample,
        seed=seed,
        min_words=min_words,
        generation=generation,
        labelled=tuple(labelled),
        also_generate=also_generate,
        generated_shift=generated_shift,
        rephrase=rephrase,
        questions=questions,
        k=k,
        retriever=retriever,
        select=select,
    )
    if run.to_label is not None:
        typer.echo(f"chosen to label: {run.to_label} (label them: scopeguard review {out}; then re-run)")
    if run.profile is None:
        typer.echo(f"no profile yet: {run.no_profile}")
        return
    typer.echo(run.profile.summary())
    typer.echo(
        f"questions: {run.questions} ({run.read} read now, {run.reused} from an earlier run, "
        f"{run.unread} unread)"
    )
    typer.echo(f"profile: {Path(run.folder) / 'profile.json'}")
    typer.echo(f"report: {run.report}" + ("" if run.plot else " (no plot: pip install 'scopeguard[plots]')"))
    exit_if_failed(
        run.unread,
        run.questions,
        "questions",
        f"the detector could not read them (left out; first error: {run.first_error}); re-run on the "
        "same --out to retry",
    )
    exit_if_failed(
        run.generation_failed,
        run.documents,
        "documents",
        "they got no questions in generation; re-run on the same --out to retry those with an LLM error",
    )
