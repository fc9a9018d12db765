"""The calibration job: corpus -> sampled documents -> generated questions -> read -> thresholds for
the budget -> profile + report card. Every step resumes: the generator's run folders
(``DIR/generation/``: both kinds of question on the first ``oos_sample`` documents;
``DIR/generation-in-scope/``: in-scope questions alone on the others), the scores
(``DIR/scores.jsonl``), the settings (``DIR/calibration.json``)."""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from scopeguard.calibration._choose import budget_rows, learned_shift, shifted
from scopeguard.calibration._config import (
    REPORT_BUDGETS,
    CalibrationConfig,
    CalibrationRunConfig,
    calibration_folder,
    make_config,
)
from scopeguard.calibration._generated import generate_sample, rephrased
from scopeguard.calibration._log import LogStage, log_questions
from scopeguard.calibration._passages import corpus_sha256, load_documents, sample_documents
from scopeguard.calibration._plot import plot_calibration
from scopeguard.calibration._questions import QuestionSet, generated_set, labelled_set
from scopeguard.calibration._report import write_report
from scopeguard.calibration._rules import Evidence, Generated
from scopeguard.calibration._rules import points as rule_points
from scopeguard.calibration._scores import SCORES_FILE, read_scores
from scopeguard.detection.detectors.base import Detector
from scopeguard.detection.detectors.registry import detector_options, get_detector
from scopeguard.detection.profile import CalibrationProfile, detector_identity
from scopeguard.errors import ConfigurationError, MissingDependencyError
from scopeguard.generation.config import GenerationConfig
from scopeguard.llm.base import ChatModel
from scopeguard.types import Document

__all__ = [
    "PLOT_FILE",
    "CalibrationRun",
    "calibrate",
    "run_calibration",
]

logger = logging.getLogger(__name__)

PLOT_FILE = "report.png"


class CalibrationRun(BaseModel):
    """What :func:`run_calibration` did: the profile, where it wrote it and the report card, and
    how many calibration questions were read (``reused`` from an earlier run; ``unread``: failed
    reads, left out of the profile; a rerun tries them again). ``generation_failed`` documents got
    no questions (their checkpoints in ``DIR/generation`` say why). ``to_label``: the file of
    logged questions chosen for a person to label (``--select``). ``profile`` is ``None`` when
    nothing could set a threshold yet (only a query log, its chosen questions not yet labelled, or
    too few of them answerable): ``no_profile`` says why."""

    model_config = ConfigDict(frozen=True)

    profile: CalibrationProfile | None
    folder: str
    report: str
    plot: str | None
    questions: int
    read: int
    reused: int
    unread: int
    first_error: str = ""
    documents: int = 0
    generation_failed: int = 0
    to_label: str | None = None
    no_profile: str = ""


def _version() -> str:
    try:
        return metadata.version("scopeguard")
    except metadata.PackageNotFoundError:
        return "unknown"


def _machine() -> str:
    from scopeguard.llamacpp import cpu_name

    return f"{cpu_name()}, {os.cpu_count() or 1} cores"


def _llm_name(llm: str | ChatModel | None) -> str | None:
    return llm if isinstance(llm, str) or llm is None else str(llm.name)


def run_calibration(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    detector: str | Detector = "default",
    llm: str | ChatModel | None = None,
    reader: Any = None,
    read: str | None = None,
    config: CalibrationConfig | None = None,
    generation_config: GenerationConfig | None = None,
    progress: bool | None = None,
    **settings: Any,
) -> CalibrationRun:
    """Calibrate ``detector`` on ``corpus`` into the folder ``out`` (see :func:`calibrate`) and say
    what was read; :func:`calibrate` returns the profile alone."""
    cfg = make_config(config, **settings)
    root = Path(out)
    corpus_sha = corpus_sha256(corpus)
    # every input is checked before a model loads or a question is written
    sets: list[QuestionSet] = [labelled_set(p) for p in cfg.labelled]
    given = (
        None
        if cfg.generation is None
        else generated_set(cfg.generation, name=f"generation:{Path(cfg.generation).resolve().name}")
    )
    logged = (
        []
        if cfg.questions is None
        else log_questions(cfg.questions, corpus, k=cfg.k, retriever=cfg.retriever)
    )
    sample: tuple[Document, ...] = ()
    n_documents = left_out = 0
    if cfg.generates() and given is None:
        docs = load_documents(corpus, min_words=cfg.min_words, max_words=cfg.max_words)
        sample = sample_documents(docs.documents, cfg.sample, cfg.seed)
        n_documents, left_out = len(docs.documents), docs.left_out
    options: dict[str, Any] = {} if reader is None else {"reader": reader}
    if read is not None:  # refused by a detector without a read mode, or given built
        options.update(detector_options(detector, read=read) if isinstance(detector, str) else {"read": read})
    det = get_detector(detector, **options)
    identity = detector_identity(det)
    folder = calibration_folder(root)
    folder.open(
        CalibrationRunConfig(
            **cfg.model_dump(),
            corpus=str(corpus),
            corpus_sha256=corpus_sha,
            detector=str(det.name),
            llm=_llm_name(llm),
        )
    )
    notes: list[str] = []
    generation_failed = 0
    joined = sum(isinstance(d.metadata.get("joined"), list) for d in sample)
    if given is not None:
        sets.append(rephrased(given, cfg, llm, folder, progress, notes))
    elif sample:
        made, generation_failed = generate_sample(
            sample,
            root,
            cfg,
            llm=llm,
            generation_config=generation_config,
            progress=progress,
            notes=notes,
            described=f"on {len(sample)} of the {n_documents} documents of {corpus}",
            keep_going=bool(sets),
        )
        sets.append(rephrased(made, cfg, llm, folder, progress, notes))
        if left_out:
            notes.append(
                f"{left_out} passages under {cfg.min_words} words with no neighbour of their source to join "
                "were left out of the draw"
            )
    questions = tuple(q for s in sets for q in s.questions)
    if not questions and not logged:
        raise ConfigurationError("no calibration questions: the question sets given are empty")
    scores = folder.log(SCORES_FILE)
    reading = read_scores(det, identity, questions, scores, progress=progress)
    log_reading = read_scores(det, identity, logged, scores, progress=progress)
    failed = [e for _, e in reading.failed] + [e for _, e in log_reading.failed]
    first_error = failed[0] if failed else ""
    if not reading.scored and not log_reading.scored:
        raise ConfigurationError(
            f"the detector {det.name!r} could read none of the {len(questions) + len(logged)} "
            f"calibration questions (first error: {first_error})"
        )
    if failed:
        notes.append(
            f"{len(failed)} questions could not be read and are left out (first error: "
            f"{first_error}); a rerun tries them again"
        )
    hedge_budget = cfg.hedge_level()
    if cfg.hedge and hedge_budget is None:
        notes.append(f"no hedge band: a budget of {cfg.budget:g} leaves no room for one below 0.5")
    shift = learned_shift(identity.get("read")) if cfg.generated_shift is None else cfg.generated_shift
    in_scope = [
        s if q.source.startswith("labelled:") else shifted(s, shift)
        for q, s in reading.scored
        if q.label == "in_scope"
    ]
    out_of_scope = reading.scores("out_of_scope")
    if shift and any(not q.source.startswith("labelled:") for q, _ in reading.scored):
        notes.append(
            f"generated in-scope questions' scores were moved up {shift:g} logits before the threshold "
            "was chosen (they are easier than people's questions); the rates below count them so moved"
        )
    logs = LogStage(root, cfg, hedge_budget, notes)
    labelled, test_weight = logs.labels(logged, log_reading, det, identity) if logged else ((), 0.0)
    evidence = Evidence(
        budget=cfg.budget,
        hedge_budget=hedge_budget,
        in_scope=in_scope,
        out_of_scope=out_of_scope,
        labelled=labelled,
        test_weight=test_weight,
        notes=notes,
    )
    points = rule_points(evidence)
    if not points and not logged:
        Generated().point(evidence)  # raises: why the questions could not set a threshold
    chosen = next(iter(points), None)
    common: dict[str, Any] = {
        "questions": len(questions) + len(logged),
        "read": len(reading.scored) + len(log_reading.scored) - reading.reused - log_reading.reused,
        "reused": reading.reused + log_reading.reused,
        "unread": len(failed),
        "first_error": first_error,
        "documents": len(sample),
        "generation_failed": generation_failed,
        "to_label": logs.to_label,
    }
    if chosen is None:
        why = next((n.split(": ", 1)[-1] for n in reversed(notes) if n.startswith("no profile from")), "")
        return CalibrationRun(
            profile=None,
            folder=str(root),
            report="",
            plot=None,
            no_profile=why or "the questions chosen to label have no label yet",
            **common,
        )
    point = points[chosen]
    profile = CalibrationProfile(
        detector=str(det.name),
        identity=identity,
        threshold=point.threshold,
        hedge_from=point.hedge_from,
        budget=cfg.budget,
        hedge_budget=hedge_budget,
        false_refusals=point.false_refusals,
        caught=point.caught,
        hedged=point.hedged,
        sources=(*(s.description for s in sets), *logs.sources, f"profile applied: {chosen}"),
        data={"corpus": corpus_sha, **{s.name: s.sha256 for s in sets}, **logs.data},
        machine=_machine(),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        scopeguard_version=_version(),
        notes=tuple(notes),
    )
    profile.save(root)
    plot: Path | None = root / PLOT_FILE
    try:
        plot_calibration(profile, in_scope, out_of_scope, root / PLOT_FILE)
        plot_line = PLOT_FILE
    except MissingDependencyError as exc:
        plot, plot_line = None, f"The plot was skipped: {exc}"
        logger.warning("%s", plot_line)
    report = write_report(
        root,
        profile,
        budget_rows(in_scope, out_of_scope, REPORT_BUDGETS),
        plot=plot_line,
        unread=len(failed),
        generated=any(s.name == "generated" or s.name.startswith("generation:") for s in sets),
        joined=joined,
        rephrased=cfg.rephrase,
        profiles=points,
        chosen=chosen,
    )
    return CalibrationRun(
        profile=profile,
        folder=str(root),
        report=str(report),
        plot=None if plot is None else str(plot),
        **common,
    )


def calibrate(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    detector: str | Detector = "default",
    llm: str | ChatModel | None = None,
    reader: Any = None,
    read: str | None = None,
    config: CalibrationConfig | None = None,
    generation_config: GenerationConfig | None = None,
    progress: bool | None = None,
    **settings: Any,
) -> CalibrationProfile:
    """Calibrate ``detector`` on ``corpus`` for a false-refusal budget; write ``out/profile.json``
    and the report card ``out/report.md`` (with ``report.png`` when matplotlib is installed).

    ``corpus``: a ``documents.jsonl`` file, a dataset folder or a folder of ``.txt`` / ``.md`` files.
    ``detector``: a registered name or a detector that scores; ``reader``: the reading model of one
    built by name that reads (``default``, ``logprob``: a spec such as ``"local:FOLDER"``; default:
    the model its head was fitted on); ``read``: the ``default`` detector's read mode
    (``"passages"`` or ``"set"``: :class:`~scopeguard.detection.detectors.default.DefaultDetector`).
    ``llm`` writes the questions (a spec or a :class:`~scopeguard.llm.ChatModel`; default: the
    generator's, as ``scopeguard generate``), with
    ``generation_config`` (default: the generator's). ``settings`` are
    :class:`CalibrationConfig` fields (``budget=0.05``, ``sample=60``, ``labelled=[...]``, ...),
    replacing those of ``config``. Rerun on the same ``out`` to resume: generated documents and
    read questions are not done again.

    >>> profile = calibrate("docs.jsonl", "calibration/", budget=0.05)  # doctest: +SKIP
    >>> guard = Guard(detector="default", calibration="calibration/")  # doctest: +SKIP

    Raises :class:`~scopeguard.errors.ConfigurationError` when the questions are too few for the
    budget (one line saying how many are needed), :class:`~scopeguard.errors.InputError` for a
    missing or empty corpus or a dataset without labels.
    """
    run = run_calibration(
        corpus,
        out,
        detector=detector,
        llm=llm,
        reader=reader,
        read=read,
        config=config,
        generation_config=generation_config,
        progress=progress,
        **settings,
    )
    if run.profile is None:
        raise ConfigurationError(
            f"no profile yet: {run.no_profile} ({run.to_label}; scopeguard review {out}, then "
            "calibrate again)"
        )
    return run.profile
