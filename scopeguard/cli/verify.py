"""``scopeguard verify`` (answer verification against a corpus) and ``scopeguard verify-compare``."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import typer

from scopeguard.cli._app import command, config_option, exit_if_failed
from scopeguard.cli._batch import EXECUTION, MAX_WAIT, POLL_INTERVAL, batch_options
from scopeguard.verification.run import VerificationConfig

_option = functools.partial(config_option, VerificationConfig)


@command("verify")
def verify(
    questions: Path = typer.Argument(
        ..., help="A dataset folder (its in-scope questions are used) or an MS MARCO queries.tsv."
    ),
    corpus: Path = typer.Option(
        ..., "--corpus", help="A dataset folder (split into passages) or a collection.tsv."
    ),
    out: Path = typer.Option(..., "--out", help="Run folder: results.jsonl, config.json, report.{json,md}."),
    llm: str = _option("llm", help="LLM spec: 'local', 'local:/path.gguf', 'openai:MODEL'."),
    retriever: str = _option(
        "retriever",
        help="bm25 (k1 0.82, b 0.68), dense, hybrid (RRF), neural (hybrid+rerank:monot5), "
        "NAME+rerank:RERANKER, or any registry spec.",
    ),
    dense_model: str | None = _option(
        "dense_model", help="Embedding model for dense/hybrid (default: packaged MiniLM)."
    ),
    reader: bool = _option(
        "reader", "--reader/--no-reader", help="Extract a concise answer before comparing."
    ),
    k: int = _option("k", help="Passages retrieved and kept as evidence."),
    passages: int = _option("passages", help="Top passages the reader/classifier sees (paper: 1)."),
    limit: int | None = _option("limit", help="Verify only the first N questions."),
    passage_sentences: int = _option("passage_sentences", help="Sentences per passage (dataset corpus)."),
    max_passages: int | None = _option("max_passages", help="Index only the first N passages."),
    qrels: Path | None = typer.Option(None, "--qrels", help="MS MARCO qrels: keep judged queries/passages."),
    negatives: int | None = _option(
        "negatives", help="With --qrels: index the judged passages plus N sampled others."
    ),
    answers_from: Path | None = typer.Option(
        None, "--answers-from", help="Reuse the generated answers of another run folder."
    ),
    execution: str = EXECUTION,
    poll_interval: float = POLL_INTERVAL,
    max_wait: float | None = MAX_WAIT,
) -> None:
    """Answer each question, retrieve with question + answer, optionally read, and classify
    Yes / No / Not Related (Huo, Arabzadeh & Clarke). Resumable: re-run to continue.
    Exits 1 when any question failed (verdict unknown with an error), 2 when it could not run."""
    from scopeguard.verification.report import distribution_markdown
    from scopeguard.verification.run import run_verification

    mode, batch = batch_options(execution, poll_interval, max_wait)
    config = VerificationConfig(
        questions=str(questions),
        corpus=str(corpus),
        llm=llm,
        retriever=retriever,
        dense_model=dense_model,
        reader=reader,
        k=k,
        passages=passages,
        passage_sentences=passage_sentences,
        max_passages=max_passages,
        qrels=str(qrels) if qrels else None,
        negatives=negatives,
        answers_from=str(answers_from) if answers_from else None,
        limit=limit,
    )
    report = run_verification(config, out, execution=mode, batch=batch)
    typer.echo(distribution_markdown({report.run: report.distribution}))
    typer.echo(f"\nllm calls: {report.llm_calls}; errors: {report.errors}; report: {out / 'report.md'}")
    exit_if_failed(
        report.errors,
        report.n,
        "questions",
        f"verdict 'unknown', with the error in {out / 'results.jsonl'}",
    )


@command("verify-compare")
def verify_compare(
    run_a: Path = typer.Argument(..., help="First run folder (rows of the matrix)."),
    run_b: Path = typer.Argument(..., help="Second run folder (columns)."),
    out: Path | None = typer.Option(None, "--out", help="Write agreement.json and agreement.md here."),
) -> None:
    """Agreement matrix between two verification runs (the paper's Tables 3-4)."""
    from scopeguard.verification.report import agreement_markdown, agreement_matrix, read_results

    matrix = agreement_matrix(read_results(run_a), read_results(run_b), name_a=run_a.name, name_b=run_b.name)
    md = agreement_markdown(matrix)
    typer.echo(md)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        payload = {**matrix.model_dump(), "metrics": matrix.metrics()}
        (out / "agreement.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        (out / "agreement.md").write_text(md + "\n", encoding="utf-8")
