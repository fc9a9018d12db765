"""``scopeguard evaluate`` / ``compare``: how well does a RAG system defuse out-of-scope questions?

Every evaluation option's default is the :class:`~scopeguard.evaluation.RunConfig` field's;
``--paper`` applies :func:`~scopeguard.evaluation.paper_evaluation_settings` on top, and only the
options given on the command line override it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import typer

from scopeguard.cli._app import command, config_option, exit_if_failed, option_given
from scopeguard.cli._batch import EXECUTION, MAX_WAIT, POLL_INTERVAL, batch_options
from scopeguard.cli._options import PROGRESS
from scopeguard.errors import ConfigurationError
from scopeguard.evaluation.store import RunConfig

_PAPER_OPTIONS = ("votes", "adaptive", "temperature", "precheck", "max_tokens", "followup")
"""The options --paper sets (each a RunConfig field of the same name)."""

_option = functools.partial(config_option, RunConfig)


@command("evaluate")
def evaluate_command(
    ctx: typer.Context,
    dataset: Path = typer.Argument(..., help="Dataset folder (documents.jsonl + questions.jsonl)."),
    out: Path = typer.Option(..., "--out", help="Run folder; re-run on the same folder to resume."),
    rag_llm: str = typer.Option(
        ..., "--rag-llm", help="LLM spec of the RAG system under test, e.g. local or openai:gpt-4o-mini."
    ),
    judge_llm: str = typer.Option("local", "--judge-llm", help="LLM spec of the defusion/refusal judge."),
    prompt: list[str] | None = typer.Option(
        None,
        "--prompt",
        help="RAG prompt: basic, two-shot or zero-shot-cot (repeatable; default: all three).",
    ),
    detector: str | None = typer.Option(
        None,
        "--detector",
        help="Also evaluate this out-of-scope detector (registry name, e.g. fast; judge asks --rag-llm).",
    ),
    limit: int | None = typer.Option(
        None, "--limit", help="Evaluate the first N questions of a label- and topic-balanced order."
    ),
    votes: int = _option("votes", help="Judge samples per judgement (self-consistency m; --paper: 9)."),
    adaptive: bool = _option(
        "adaptive",
        "--adaptive/--no-adaptive",
        help="Stop voting early once the majority is settled (--paper: off).",
    ),
    temperature: float = _option("temperature", help="Sampling temperature of the judge votes."),
    precheck: bool = _option(
        "precheck",
        "--precheck/--no-precheck",
        help="Decide obvious refusals/answers lexically, without the judge (--paper: off).",
    ),
    max_tokens: int = _option(
        "max_tokens", help="Token limit of each RAG response and judge reply (0: no cap; --paper: no cap)."
    ),
    followup: bool = _option(
        "followup",
        "--followup/--no-followup",
        help="Ask a judge sample that gave no verdict for one in a short follow-up turn "
        "(scopeguard's addition; --no-followup is the paper's judge).",
    ),
    paper: bool = typer.Option(
        False,
        "--paper",
        help="ELOQ's evaluation as published: 9 judge votes, all drawn, no follow-up turn, no "
        "lexical pre-check, no cap on responses or judge replies. Options given explicitly still apply.",
    ),
    plots: bool = typer.Option(
        True, "--plots/--no-plots", help="Write PNG plots (needs matplotlib: the plots extra)."
    ),
    progress: bool = PROGRESS,
    execution: str = EXECUTION,
    poll_interval: float = POLL_INTERVAL,
    max_wait: float | None = MAX_WAIT,
) -> None:
    """Answer each question with each RAG prompt, judge defusion and false refusal, write the report.

    Exits 1 when any step (answer + judgement, or detection) failed, 2 when it could not run.
    """
    from scopeguard.evaluation import available_rag_prompts, evaluate_config, paper_evaluation_settings

    mode, batch = batch_options(execution, poll_interval, max_wait)
    if max_tokens < 0:
        raise ConfigurationError(f"--max-tokens must be at least 0 (0: no cap), got {max_tokens}")
    config = RunConfig(
        dataset=str(dataset),
        rag=rag_llm,
        judge=judge_llm,
        prompts=tuple(dict.fromkeys(prompt or available_rag_prompts())),
        detector=detector,
        votes=votes,
        adaptive=adaptive,
        temperature=temperature,
        precheck=precheck,
        max_tokens=max_tokens or None,
        limit=limit,
        followup=followup,
    )
    if paper:
        preset = paper_evaluation_settings()
        given = {name for name in _PAPER_OPTIONS if option_given(ctx, name)}
        config = config.model_copy(update={k: v for k, v in preset.items() if k not in given})
    run = evaluate_config(
        config, out, progress=None if progress else False, plots=plots, execution=mode, batch=batch
    )
    typer.echo(run.report.summary)
    typer.echo(f"\nReport, tables, metrics.json and plots written to {out}")
    exit_if_failed(
        run.failed,
        run.steps,
        "evaluation steps",
        f"see the 'error' field in {run.store.responses_path} and {run.store.detections_path.name}; "
        "re-run on the same --out to retry them",
    )


@command("compare")
def compare_command(
    run_a: Path = typer.Argument(..., help="First run folder (A)."),
    run_b: Path = typer.Argument(..., help="Second run folder (B)."),
    paired: bool = typer.Option(
        True, "--paired/--unpaired", help="Compare only the questions and prompts both runs share."
    ),
    out: Path | None = typer.Option(None, "--out", help="Also write the Markdown table to this file."),
) -> None:
    """Show two evaluation runs side by side (rates in %, delta = B - A)."""
    from scopeguard.evaluation import compare_runs

    text = compare_runs(run_a, run_b, paired=paired).markdown()
    typer.echo(text)
    if out is not None:
        out.write_text(text, encoding="utf-8")
