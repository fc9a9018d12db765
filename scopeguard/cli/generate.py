"""``scopeguard generate``: build a test set (out-of-scope + in-scope questions) from a corpus."""

from __future__ import annotations

from pathlib import Path

import typer

from scopeguard.cli._app import app, exit_if_failed, handle_errors
from scopeguard.errors import ConfigurationError


@app.command("generate")
@handle_errors
def generate(
    corpus: str = typer.Argument(..., help="A folder of .txt/.md files, a .jsonl file, or a dataset folder."),
    out: Path = typer.Option(..., "--out", help="Output folder; re-run on the same folder to resume."),
    llm: str = typer.Option(
        "local", "--llm", help="LLM spec that writes the questions, e.g. local or openai:gpt-4o-mini."
    ),
    max_docs: int | None = typer.Option(
        None, "--max-docs", help="Use at most N documents (after the length rule)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", help="Documents processed at the same time."),
    mode: str = typer.Option(
        "faithful", "--mode", help="faithful (the paper's 13 calls) or efficient (batched recovery)."
    ),
    claims: int = typer.Option(6, "--claims", help="Claims extracted per document."),
    rounds: int = typer.Option(3, "--rounds", help="Masking/recovery rounds."),
    in_scope: int = typer.Option(3, "--in-scope", help="In-scope questions per document."),
    filter_: bool = typer.Option(
        True, "--filter/--no-filter", help="Drop questions the judge finds answerable."
    ),
    judge_llm: str | None = typer.Option(
        None, "--judge-llm", help="LLM spec of the filter's judge (default: --llm)."
    ),
    filter_with: str = typer.Option(
        "auto",
        "--filter-with",
        help="The filter: judge (the paper: an LLM judge on --judge-llm), a detector name (fast, "
        "lexical, ...: offline), or auto (the judge, except with a small packaged local LLM, whose "
        "judgement is near chance: then fast).",
    ),
    min_oos: int = typer.Option(
        1,
        "--min-oos",
        help="Run extra sampled rounds for a document that keeps fewer out-of-scope questions "
        "(scopeguard's addition; 0 = the paper).",
    ),
    extra_rounds: int = typer.Option(
        2, "--extra-rounds", help="At most this many extra rounds per document."
    ),
    paper: bool = typer.Option(
        False,
        "--paper",
        help="The paper's method only: no extra rounds, no recovery or question fallbacks, no judge "
        "follow-up, and (unless --filter-with says otherwise) the LLM-judge filter.",
    ),
    min_words: int = typer.Option(150, "--min-words", help="Skip documents shorter than this (0: keep all)."),
    max_words: int = typer.Option(
        300, "--max-words", help="Cut documents after this many words (0: no cut)."
    ),
    eloq_export: Path | None = typer.Option(
        None, "--eloq-export", help="Also write the ELOQ layout to this folder."
    ),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="Show a progress bar on a terminal."
    ),
) -> None:
    """Generate out-of-scope questions with ELOQ's guided hallucination, plus in-scope ones.

    Exits 1 when any document failed (the summary says how many), 2 when it could not run.
    """
    from pydantic import ValidationError

    from scopeguard.generation import GenerationConfig, Generator, LengthRule, export_eloq

    if mode not in ("faithful", "efficient"):
        raise ConfigurationError(f"--mode must be 'faithful' or 'efficient', got {mode!r}")
    try:
        settings: dict[str, object] = {
            "mode": mode,
            "n_claims": claims,
            "rounds": rounds,
            "n_in_scope": in_scope,
            "filter": filter_,
            "extra_rounds": extra_rounds,
        }
        if paper:
            config = GenerationConfig.paper(**settings)
        else:
            config = GenerationConfig(min_oos=min_oos, **settings)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigurationError(
            f"invalid option: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}"
        ) from None
    rule = LengthRule(min_words=min_words or None, max_words=max_words or None)
    generator = Generator(
        llm,
        config=config,
        judge="judge" if paper and filter_with == "auto" else filter_with,
        judge_llm=judge_llm,
        concurrency=concurrency,
        progress=None if progress else False,
    )
    summary = generator.run(corpus, out, length_rule=rule, max_docs=max_docs)
    typer.echo(summary.table())
    if eloq_export is not None:
        export_eloq(out, eloq_export)
        typer.echo(f"ELOQ layout written to {eloq_export}")
    exit_if_failed(
        summary.docs_failed + summary.docs_errored_run,
        summary.docs_in_corpus - summary.docs_skipped,
        "documents",
        f"{summary.docs_errored_run} with an LLM error this run (re-run on the same --out to retry them), "
        f"{summary.docs_failed} for good (their checkpoints in {out} say why)",
    )
