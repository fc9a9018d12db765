"""``scopeguard generate``: build a test set (out-of-scope + in-scope questions) from a corpus.

Every generation option's default is the :class:`~scopeguard.generation.config.GenerationConfig`
field's; ``--paper`` starts from :meth:`GenerationConfig.paper` instead, and only the options
given on the command line override it. ``--questions LOG`` lends the questions of a query log to
the documents next to their own instead (:mod:`scopeguard.generation.lending`, whose
:class:`~scopeguard.generation.lending.LendingConfig` gives ``--retriever``, ``--neighbours``
and ``--min-similarity`` their defaults), filtered by the same generator's filter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import typer

from scopeguard.cli._app import command, config_option, exit_if_failed, option_flag, option_given
from scopeguard.cli._batch import EXECUTION, MAX_WAIT, POLL_INTERVAL, batch_options
from scopeguard.cli._options import PROGRESS, log_retriever_option, query_log_option
from scopeguard.errors import ConfigurationError
from scopeguard.generation import DEFAULT_WRITER
from scopeguard.generation.config import PAPER_IN_SCOPE, PAPER_VOTES, GenerationConfig, Mode
from scopeguard.generation.lending import LendingConfig

# CLI option -> GenerationConfig field
_FIELDS = {
    "mode": "mode",
    "claims": "n_claims",
    "rounds": "rounds",
    "in_scope": "n_in_scope",
    "filter_": "filter",
    "votes": "judge_votes",
    "min_oos": "min_oos",
    "extra_rounds": "extra_rounds",
    "max_oos": "max_oos",
}
# options that write questions of their own, which lending (--questions) does not do
_NOT_LENDING = (
    "claims",
    "rounds",
    "in_scope",
    "min_oos",
    "max_oos",
    "extra_rounds",
    "paper",
    "min_words",
    "max_words",
    "max_docs",
    "eloq_export",
    "execution",
    "poll_interval",
    "max_wait",
)
_LENDING_ONLY = ("retriever", "neighbours", "min_similarity")


def _check_lending_options(ctx: typer.Context, lending: bool) -> None:
    """Refuse an option given on the command line that the chosen job (generation, or lending with
    ``--questions``) does not read."""
    wrong = [p for p in (_NOT_LENDING if lending else _LENDING_ONLY) if option_given(ctx, p)]
    if wrong:
        names = ", ".join(option_flag(p) for p in wrong)
        why = "not used when lending a query log (--questions)" if lending else "used only with --questions"
        raise ConfigurationError(f"{names}: {why}")


def _config(ctx: typer.Context, paper: bool, values: dict[str, Any]) -> GenerationConfig:
    """The config from the options; with ``paper``, only the options given explicitly override."""
    from pydantic import ValidationError

    given = {
        field: values[option]
        for option, field in _FIELDS.items()
        # --max-oos only when given: a --min-oos above the default cap then raises the cap to it
        if (not paper and option != "max_oos") or option_given(ctx, option)
    }
    if given.get("max_oos") == 0:
        given["max_oos"] = None
    try:
        return GenerationConfig.paper(**given) if paper else GenerationConfig(**given)
    except ValidationError as exc:
        raise _invalid_option(exc) from None


def _invalid_option(exc: Any) -> ConfigurationError:
    """A config's ``ValidationError`` as one line naming the option."""
    error = exc.errors()[0]
    # a check across options (max_oos below min_oos) names no one field
    where = f"{error['loc'][0]}: " if error["loc"] else ""
    return ConfigurationError(f"invalid option: {where}{error['msg']}")


@command("generate")
def generate(
    ctx: typer.Context,
    corpus: str = typer.Argument(..., help="A folder of .txt/.md files, a .jsonl file, or a dataset folder."),
    out: Path = typer.Option(..., "--out", help="Output folder; re-run on the same folder to resume."),
    llm: str = typer.Option(
        DEFAULT_WRITER,
        "--llm",
        help="LLM spec that writes the questions, e.g. openai:gpt-4o-mini, or local (the packaged 0.5B: "
        "faster, fewer natural questions).",
    ),
    max_docs: int | None = typer.Option(
        None, "--max-docs", help="Use at most N documents (after the length rule)."
    ),
    concurrency: str | None = typer.Option(
        None,
        "--concurrency",
        help="Documents processed at the same time (default: 1 with a local GGUF model, else 4), or "
        "auto: an adaptive limit on requests in flight (grows while latency holds, halves on 429s; "
        "for vLLM and other OpenAI-compatible servers).",
    ),
    execution: str = EXECUTION,
    poll_interval: float = POLL_INTERVAL,
    max_wait: float | None = MAX_WAIT,
    mode: str = config_option(
        GenerationConfig,
        "mode",
        help="auto (offline with a packaged local model, else faithful); faithful (the paper's "
        "Algorithm 1, 13 calls) or efficient (batched recovery); the offline modes for small local "
        "models: unstated (what a sentence names but does not say), followup (follow-up "
        "questions), offline (both; follow-ups only where the unstated ones keep fewer than "
        "--min-oos), perturb (SQuAD 2.0-style edits of in-scope questions), in_scope (in-scope "
        "questions alone, a fraction of the time). Offline "
        "candidates are kept by the logprob detector.",
    ),
    claims: int = config_option(
        GenerationConfig, "n_claims", "--claims", help="Claims extracted per document."
    ),
    rounds: int = config_option(GenerationConfig, "rounds", help="Masking/recovery rounds."),
    in_scope: int = config_option(
        GenerationConfig,
        "n_in_scope",
        "--in-scope",
        help=f"In-scope questions per document (--paper: {PAPER_IN_SCOPE}).",
    ),
    filter_: bool = config_option(
        GenerationConfig, "filter", "--filter/--no-filter", help="Drop questions the judge finds answerable."
    ),
    votes: int = config_option(
        GenerationConfig,
        "judge_votes",
        "--votes",
        help=f"Votes m of the LLM-judge filter (self-consistency majority; --paper: {PAPER_VOTES}).",
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
    min_oos: int = config_option(
        GenerationConfig,
        "min_oos",
        help="Run extra sampled rounds for a document that keeps fewer out-of-scope questions "
        "and, in offline mode, ask follow-ups only for such a document (scopeguard's addition; 0 = "
        "the paper, and offline asks both kinds).",
    ),
    max_oos: int = config_option(
        GenerationConfig,
        "max_oos",
        help="Keep at most this many out-of-scope questions of one document, the first kept, in the "
        "offline modes (scopeguard's addition; 0 = no cap, as the paper).",
    ),
    extra_rounds: int = config_option(
        GenerationConfig, "extra_rounds", help="At most this many extra rounds per document."
    ),
    paper: bool = typer.Option(
        False,
        "--paper",
        help=f"The paper's method only: m={PAPER_VOTES} judge votes with no reply cap and no follow-up, "
        f"{PAPER_IN_SCOPE} in-scope questions, no extra rounds, no recovery or question fallbacks, "
        "and (unless --filter-with says otherwise) the LLM-judge filter. Options given explicitly "
        "still apply.",
    ),
    min_words: int = typer.Option(150, "--min-words", help="Skip documents shorter than this (0: keep all)."),
    max_words: int = typer.Option(
        300, "--max-words", help="Cut documents after this many words (0: no cut)."
    ),
    eloq_export: Path | None = typer.Option(
        None, "--eloq-export", help="Also write the ELOQ layout to this folder."
    ),
    progress: bool = PROGRESS,
    questions: Path | None = query_log_option(
        "instead of writing questions, ask each logged question of the documents ranked below its "
        "own and keep those the filter finds out of scope."
    ),
    retriever: str = log_retriever_option(LendingConfig, "ranks the corpus for each logged question"),
    neighbours: int = config_option(
        LendingConfig,
        "neighbours",
        help="With --questions: the documents below a question's own that it is asked of.",
    ),
    min_similarity: float = config_option(
        LendingConfig,
        "min_similarity",
        help="With --questions: ask a neighbour only when it and the question's own document are at "
        "least this alike (MiniLM cosine; 0: ask every neighbour).",
    ),
) -> None:
    """Generate out-of-scope questions with ELOQ's guided hallucination, plus in-scope ones; or,
    with --questions, lend a query log's questions to the documents next to their own.

    Exits 1 when any document (or question-document read) failed (the summary says how many), 2
    when it could not run.
    """
    from scopeguard.generation import Generator, LengthRule, export_eloq

    _check_lending_options(ctx, questions is not None)
    modes = get_args(Mode)
    if mode not in modes:
        raise ConfigurationError(f"--mode must be one of {', '.join(modes)}; got {mode!r}")
    config = _config(
        ctx,
        paper,
        {
            "mode": mode,
            "claims": claims,
            "rounds": rounds,
            "in_scope": in_scope,
            "filter_": filter_,
            "votes": votes,
            "min_oos": min_oos,
            "max_oos": max_oos,
            "extra_rounds": extra_rounds,
        },
    )
    execution_mode, batch = batch_options(execution, poll_interval, max_wait)
    if concurrency is not None and concurrency != "auto" and not concurrency.isdigit():
        raise ConfigurationError(f"--concurrency must be a number or 'auto', got {concurrency!r}")
    rule = LengthRule(min_words=min_words or None, max_words=max_words or None)
    generator = Generator(
        llm,
        config=config,
        judge="judge" if paper and filter_with == "auto" else filter_with,
        judge_llm=judge_llm,
        concurrency=None if concurrency is None else "auto" if concurrency == "auto" else int(concurrency),
        execution=execution_mode,
        batch=batch,
        progress=None if progress else False,
    )
    if questions is not None:
        settings = {"retriever": retriever, "neighbours": neighbours, "min_similarity": min_similarity}
        _lend(generator, corpus, questions, out, settings, progress)
        return
    summary = generator.run(corpus, out, length_rule=rule, max_docs=max_docs)
    why = f"(empty, or under --min-words {min_words}"
    keep = "pass a lower --min-words (0 keeps every document)"
    if summary.docs_in_corpus and summary.docs_skipped == summary.docs_in_corpus:
        raise ConfigurationError(
            f"all {summary.docs_in_corpus} documents were skipped {why}): nothing was generated; {keep} "
            "or join short passages into longer documents"
        )
    typer.echo(summary.table())
    if summary.docs_skipped:
        typer.echo(
            f"{summary.docs_skipped} of {summary.docs_in_corpus} documents were skipped {why}, the ELOQ "
            f"paper's length rule): {keep} to write questions on short passages too",
            err=True,
        )
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


def _lend(
    generator: Any, corpus: str, log: Path, out: Path, settings: dict[str, Any], progress: bool
) -> None:
    """``--questions``: lend the log's questions over ``corpus`` with ``generator``'s filter."""
    from pydantic import ValidationError

    from scopeguard.generation.lending import Lender

    try:
        config = LendingConfig(**settings)
    except ValidationError as exc:
        raise _invalid_option(exc) from None
    lender = Lender(generator, config=config, progress=None if progress else False)
    summary = lender.run(corpus, log, out)
    typer.echo(summary.table())
    exit_if_failed(
        summary.failed_run,
        summary.pairs,
        "question-document reads",
        "re-run on the same --out to retry them (the warnings above say why they failed)",
    )
