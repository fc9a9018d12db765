"""CLI commands for detectors: ``eval-detector`` and ``preread`` (``train-detector`` is in train.py).

In ``--json`` output a metric that is undefined (AUROC with one class present) is ``null``.
``caught at <=10% false refusals`` is ``recall_oos_at_fr10`` (see
:mod:`scopeguard.evaluation.detection`): what the detector's scores could do at that budget,
whatever its threshold.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from scopeguard.cli._app import command, exit_if_failed, metric_text
from scopeguard.cli._options import (
    CALIBRATION,
    JUDGE_LLM,
    PROGRESS,
    READ_MODE,
    READER,
    RENAMED_LLM,
    refuse_renamed_llm,
)
from scopeguard.cli.check import calibrated_detector
from scopeguard.retrieval.registry import DEFAULT_RETRIEVER, get_retriever

_TABLE_ROWS = (
    ("n", "questions", "{:.0f}"),
    ("accuracy", "accuracy", "{:.3f}"),
    ("precision_oos", "precision (out of scope)", "{:.3f}"),
    ("recall_oos", "recall (out of scope)", "{:.3f}"),
    ("f1_oos", "F1 (out of scope)", "{:.3f}"),
    ("false_refusal_rate", "false refusals (in scope)", "{:.3f}"),
    ("recall_oos_at_fr10", "caught at <=10% false refusals", "{:.3f}"),
    ("auroc", "AUROC", "{:.3f}"),
    ("unknown_rate", "unknown rate", "{:.1%}"),
    ("hedged_share", "hedged (calibration)", "{:.1%}"),
    ("latency_ms_p50", "latency p50 (ms)", "{:.1f}"),
    ("latency_ms_p95", "latency p95 (ms)", "{:.1f}"),
    ("escalated_share", "escalated", "{:.1%}"),
    ("llm_calls_mean", "LLM calls / question", "{:.2f}"),
)


# with --retrieve K, before the rows above (the _at_profile rows only with --calibration)
_RETRIEVED_ROWS = (
    ("answerable", "answerable questions", "{:.0f}"),
    ("recall_at_k", "recall@K (answerable)", "{:.3f}"),
    ("answerable_not_retrieved", "answerable, not retrieved", "{:.0f}"),
    ("in_scope", "in scope (answerable, retrieved)", "{:.0f}"),
    ("false_refusals_at_threshold", "false refusals at the threshold", "{:.3f}"),
    ("caught_at_threshold", "caught at the threshold", "{:.3f}"),
    ("false_refusals_at_profile", "false refusals at the profile", "{:.3f}"),
    ("caught_at_profile", "caught at the profile", "{:.3f}"),
)


@command("eval-detector")
def eval_detector_command(
    datasets: list[Path] = typer.Argument(
        ..., help="Dataset folder(s) (documents.jsonl + questions.jsonl); one table each."
    ),
    detector: str = typer.Option(
        "default",
        "--detector",
        "-d",
        help="Detector name: default, fast, logprob, lexical, nli, probe, judge.",
    ),
    model: Path | None = typer.Option(
        None, "--model", help="Trained head (file or folder) passed to the detector as model=."
    ),
    reader: str | None = READER,
    read_mode: str | None = READ_MODE,
    llm: str | None = JUDGE_LLM,
    calibration: Path | None = CALIBRATION,
    as_json: bool = typer.Option(
        False, "--json", help="Print one JSON object per dataset (one line each) instead of tables."
    ),
    per_question: Path | None = typer.Option(
        None,
        "--per-question",
        help="Write one JSON line per question (dataset, id, label, predicted, score, stage, hedge, "
        "uncovered, latency_ms, ...; with --retrieve also truth, retrieved, gold_retrieved, "
        "at_threshold) to this file.",
    ),
    limit: int | None = typer.Option(None, "--limit", help="Evaluate only the first N questions of each."),
    progress: bool = PROGRESS,
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="torch threads for embedding models (1 is fastest on a busy machine).",
    ),
    retrieve: int | None = typer.Option(
        None,
        "--retrieve",
        metavar="K",
        help="Read each question against the top K of the dataset's documents a retriever returns, "
        "as in production; in scope only when answerable and its own document was retrieved.",
    ),
    retriever: str | None = typer.Option(
        None,
        "--retriever",
        metavar="NAME",
        help=f"The retriever for --retrieve (default {DEFAULT_RETRIEVER}): any retriever name or spec.",
    ),
) -> None:
    """Run a detector on every question of each DATASET against its own document; print the metrics.

    With --retrieve K each question is read against the top K documents a retriever returns
    instead (the recall@K of the answerable questions and the rates at the detector's threshold
    are reported too). With --calibration the labels (and so accuracy and false refusals) come
    from the profile's threshold. Exits 1 when the detector failed on any question (it counts as
    unknown), 2 when it could not run (a profile made for another detector, too).
    """
    from scopeguard.data import load_dataset
    from scopeguard.errors import InputError
    from scopeguard.evaluation._retrieved import read_retrieved, retrieved_metrics, retrieved_records
    from scopeguard.evaluation.detection import detection_metrics, per_question_records, run_detector

    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if retrieve is not None and retrieve < 1:
        raise InputError(f"--retrieve must be at least 1, got {retrieve}")
    if retriever is not None and retrieve is None:
        raise InputError("--retriever needs --retrieve K (the number of documents to retrieve)")
    # the name checked (a one-line error listing the valid ones) before any model loads
    index = get_retriever(retriever or DEFAULT_RETRIEVER) if retrieve is not None else None
    if threads is not None:
        if threads < 1:
            raise InputError(f"--threads must be at least 1, got {threads}")
        from scopeguard._optional import require

        require("torch", extra="embeddings", feature="--threads").set_num_threads(threads)
    loaded = [(path, load_dataset(path)) for path in datasets]  # every folder checked before any model loads
    det, profile, named = calibrated_detector(
        detector, calibration=calibration, model=model, llm=llm, reader=reader, read=read_mode
    )
    if named:
        typer.echo(f"calibration {named}", err=as_json)
    rows = [row for row in _TABLE_ROWS if profile is not None or row[0] != "hedged_share"]
    if index is not None:
        rows = [r for r in _RETRIEVED_ROWS if profile is not None or "profile" not in r[0]] + rows
    records: list[dict[str, object]] = []
    failed = total = 0
    first_error = ""
    for path, ds in loaded:
        show = None if progress else False
        if index is None or retrieve is None:
            y_true, verdicts = run_detector(det, ds, limit=limit, progress=show)
            metrics = detection_metrics(y_true, verdicts)
            records.extend(per_question_records(path.name, ds, verdicts))
        else:
            read = read_retrieved(det, ds, k=retrieve, retriever=index, limit=limit, progress=show)
            metrics = retrieved_metrics(read, k=retrieve, calibrated=profile is not None)
            verdicts = [r.verdict for r in read]
            records.extend(retrieved_records(path.name, ds, read))
        trained_on = _trained_on(det)
        if trained_on and Path(path).resolve().name in trained_on:
            typer.echo(
                f"note: this detector's head was fitted on {path.name!r}: the accuracy below is training "
                "accuracy; quote document-grouped cross-validation instead (benchmarks/detectors.py)",
                err=True,
            )
        if as_json:
            where = None if calibration is None else str(calibration)
            retrieval = {} if index is None else {"retriever": index.name}
            out = {"detector": detector, "dataset": str(path), "calibration": where, **retrieval, **metrics}
            typer.echo(
                json.dumps(
                    {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
                )
            )
        else:
            against = "" if index is None else f", top {retrieve} of {index.name}"
            typer.echo(f"detector {detector} on {path}{against}")
            width = max(len(label) for _, label, _ in rows)
            for key, label, fmt in rows:  # every metric by its row's format, counts too
                typer.echo(f"  {label:<{width}}  {metric_text(float(metrics[key]), fmt)}")
            if len(loaded) > 1:
                typer.echo("")
        errors = [v for v in verdicts if v.error is not None]
        failed += len(errors)
        total += len(verdicts)
        first_error = first_error or (errors[0].error or "" if errors else "")
    if per_question is not None:
        from scopeguard.data import atomic_write_jsonl

        atomic_write_jsonl(per_question, records)
        typer.echo(f"per-question results: {per_question} ({len(records)} lines)", err=True)
    exit_if_failed(
        failed,
        total,
        "questions",
        "the detector raised (counted as 'unknown' in the metrics); first error: " + first_error,
    )


def _trained_on(detector: object) -> list[str]:
    """The dataset names a detector's head records as its training data (empty if none)."""
    head = getattr(detector, "head", None) or getattr(getattr(detector, "first", None), "head", None)
    info = getattr(head, "info", None)
    if not isinstance(info, dict):
        return []
    names = info.get("datasets") or ([info["trained_on"]] if info.get("trained_on") else [])
    return [str(n) for n in names]


@command("preread")
def preread_command(
    corpus: Path = typer.Argument(
        ..., help="Documents: a dataset folder (documents.jsonl), a folder of .txt/.md files or a JSONL file."
    ),
    detector: str = typer.Option("default", "--detector", "-d", help="default or logprob."),
    model: Path | None = typer.Option(
        None, "--model", help="The detector's head (default: the packaged one)."
    ),
    reader: str | None = typer.Option(
        None,
        "--reader",
        metavar="SPEC",
        help="The reading model's spec (default: the one the head was fitted on).",
    ),
    llm: str | None = RENAMED_LLM,
    state_dir: Path | None = typer.Option(
        None, "--state-dir", help="Where the states go (default $SCOPEGUARD_CACHE/llama-states)."
    ),
    progress: bool = PROGRESS,
) -> None:
    """Read a fixed corpus ahead of the questions and keep the reader's state after each document on
    disk: a later question about a document costs only its own tokens (llama.cpp readers)."""
    from scopeguard.detection.detectors.logprob import LogProbDetector
    from scopeguard.detection.head.default import DefaultHead, default_head_path
    from scopeguard.detection.read import verdict_scorer
    from scopeguard.errors import ConfigurationError
    from scopeguard.generation.corpus import corpus_passages

    refuse_renamed_llm("preread", llm)
    if detector not in ("default", "logprob"):
        raise ConfigurationError(
            f"--detector must be default or logprob (the detectors that read), got {detector!r}"
        )
    docs = list(corpus_passages(corpus))
    # default's reading stage is a LogProbDetector on the model its head was fitted on (no fast stage
    # needed here); logprob's head is the one given, if any
    if detector == "default":
        fitted_on = DefaultHead.load(model if model is not None else default_head_path()).verdict_model
        spec = reader or f"local:{fitted_on}"
        head: dict[str, Any] = {}
    else:
        spec = reader or "local"
        head = {} if model is None else {"model": model}
    if state_dir is not None and not spec.startswith("local"):
        raise ConfigurationError(f"--state-dir applies to llama.cpp readers (local:...), not {spec!r}")
    scorer = verdict_scorer(spec, **({} if state_dir is None else {"state_dir": state_dir}))
    reading = LogProbDetector(reader=scorer, **head)
    n = reading.preread(docs, progress=None if progress else False)
    if n == 0:
        raise ConfigurationError(
            "the reading model keeps no state between prompts (only llama.cpp readers can pre-read)"
        )
    where = getattr(reading.scorer, "state_dir", None)
    typer.echo(f"pre-read {n} passages of {len(docs)} documents" + (f" into {where}" if where else ""))
