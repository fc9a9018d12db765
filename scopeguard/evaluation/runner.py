"""ELOQ Algorithm 2 as a resumable loop: answer, detect, judge defusion and false refusal.

For every selected question and every answerer (one per RAG prompt, or the user's pipeline):

1. the system under test answers the question from the question's own document;
2. out-of-scope questions: the defusion judge decides (m votes) whether the response defuses it;
   in-scope questions: the refusal judge decides whether the response refuses / claims the
   information is missing (a false refusal);
3. once per question, the optional detector gives its out-of-scope verdict.

With a detector the report also puts every prompt behind the guard: the verdict routes each
question to the policy (refused), to a hedged answer or to the answer (see
:mod:`scopeguard.evaluation.report`). Hedged verdicts come from a detector under a calibration
profile with a hedge band: ``detector=calibrated(get_detector("default"), DIR)``
(:func:`scopeguard.detection.profile.calibrated`). The judges judge what the system answered; a
response that ends with the hedge caveat line (:data:`scopeguard.policies.HEDGE_CAVEAT`, as a
guarded pipeline appends it) is judged without that line, so a caveat neither defuses nor refuses
by itself: hedges are counted by the report's guarded view, both ways.

Every record is appended and fsynced as soon as it exists (:class:`~.store.RunStore`); a re-run
with the same ``out`` folder skips the (question, prompt) keys already done and retries those
that ended in an error.

``execution="batch"`` sends the answers and judge votes as OpenAI Batch API jobs in waves
(:func:`scopeguard.batch.run_waves`: each (question, prompt) replays against the reply cache
``OUT/.cache/replies.jsonl`` until its first unanswered request; those go out as one job; the
next wave gets one step further). Job state is kept in ``OUT/.batch/``, the tokens per stage
(``answer``, ``judge``) at the batch price in ``OUT/batch_usage.json``; the detector (if any)
runs online. It needs ``openai:`` models for the RAG system and the judge.
"""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tqdm.auto import tqdm

from scopeguard._progress import show_progress
from scopeguard.batch import BatchSettings
from scopeguard.data import Dataset, LabeledQuestion, load_dataset
from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError, LLMConnectionError, ScopeGuardError
from scopeguard.evaluation._batch import check_batchable, respond_in_batches
from scopeguard.evaluation.answering import Answerer, PromptAnswerer, as_answerer, available_rag_prompts
from scopeguard.evaluation.defusion import DefusionJudge
from scopeguard.evaluation.refusal import RefusalJudge
from scopeguard.evaluation.store import DetectionRecord, ResponseRecord, RunConfig, RunStore
from scopeguard.llm.base import ChatModel
from scopeguard.policies import HEDGE_CAVEAT
from scopeguard.types import Document

if TYPE_CHECKING:
    from scopeguard.evaluation.report import EvaluationReport

__all__ = [
    "DEFAULT_PROMPTS",
    "EvaluationRunReport",
    "RunResult",
    "evaluate",
    "evaluate_config",
    "run_evaluation",
    "select_questions",
]

DEFAULT_PROMPTS: tuple[str, ...] = ("basic", "two-shot", "zero-shot-cot")

Execution = Literal["online", "batch"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    """What one call to :func:`run_evaluation` did (the records themselves are in ``store``)."""

    store: RunStore
    questions: int
    done: int
    skipped: int
    errors: int


def select_questions(dataset: Dataset, limit: int | None = None) -> list[LabeledQuestion]:
    """The first ``limit`` questions of a label- and topic-balanced, deterministic order.

    Labels alternate (out-of-scope, in-scope, ...) and, within a label, topics take turns, so
    ``limit=20`` gives 10 + 10 questions spread over as many topics as possible. The order
    depends only on the dataset, so a resumed or extended run selects the same questions first.
    """
    if limit is not None and limit < 1:
        raise ConfigurationError(f"limit must be at least 1, got {limit}")
    by_label: dict[str, list[LabeledQuestion]] = {}
    for label in ("out_of_scope", "in_scope"):
        by_topic: dict[str, list[LabeledQuestion]] = defaultdict(list)
        for q in dataset.questions:
            if q.label == label:
                by_topic[dataset.topic(q)].append(q)
        queues = [by_topic[t] for t in sorted(by_topic)]
        ordered: list[LabeledQuestion] = []
        while any(queues):
            for queue in queues:
                if queue:
                    ordered.append(queue.pop(0))
        by_label[label] = ordered
    merged: list[LabeledQuestion] = []
    oos, ins = by_label["out_of_scope"], by_label["in_scope"]
    for i in range(max(len(oos), len(ins))):
        merged.extend(x[i] for x in (oos, ins) if i < len(x))
    return merged if limit is None else merged[:limit]


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _judged_text(response: str) -> str:
    """What the judges read of ``response``: without a trailing hedge caveat line (see the module
    docstring)."""
    body = response.rstrip()
    return body.removesuffix(HEDGE_CAVEAT).rstrip() if body.endswith(HEDGE_CAVEAT) else response


def run_evaluation(
    dataset: Dataset | str | os.PathLike[str],
    answerers: Sequence[Answerer],
    *,
    out: str | os.PathLike[str],
    defusion_judge: DefusionJudge,
    refusal_judge: RefusalJudge | None = None,
    detector: Detector | None = None,
    limit: int | None = None,
    config: RunConfig | None = None,
    progress: bool | None = None,
    execution: Execution = "online",
    batch: BatchSettings | None = None,
) -> RunResult:
    """Run (or resume) an evaluation into the folder ``out``; see the module docstring.

    ``execution="batch"`` runs the responses in waves of Batch API jobs (``batch``: polling, price
    factor); it needs :class:`~.answering.PromptAnswerer` answerers and judges on ``openai:`` models.
    """
    if not answerers:
        raise ConfigurationError("nothing to evaluate: pass at least one answerer (RAG prompt or pipeline)")
    if execution not in ("online", "batch"):
        raise ConfigurationError(f"execution must be 'online' or 'batch', got {execution!r}")
    if execution == "batch":
        check_batchable(answerers, defusion_judge, refusal_judge)
    names = [a.name for a in answerers]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"answerer names must be unique, got {names}")
    dataset_path = "" if isinstance(dataset, Dataset) else str(dataset)
    data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
    store = RunStore(out)
    store.open(
        config
        or RunConfig(
            dataset=dataset_path,
            rag=answerers[0].llm.name if isinstance(answerers[0], PromptAnswerer) else answerers[0].name,
            judge=defusion_judge.llm.name,
            prompts=tuple(names),
            detector=getattr(detector, "name", None),
            votes=defusion_judge.votes,
            adaptive=defusion_judge.adaptive,
            temperature=defusion_judge.temperature,
            precheck=bool(refusal_judge and refusal_judge.precheck),
            max_tokens=defusion_judge.max_tokens,
            limit=limit,
        )
    )
    questions = select_questions(data, limit)
    done_responses = {k for k, r in store.responses().items() if r.error is None}
    done_detections = {k for k, r in store.detections().items() if r.error is None}
    total = len(questions) * (len(answerers) + (detector is not None))
    done = skipped = errors = 0
    bar = tqdm(total=total, desc="evaluate", unit="step", disable=not show_progress(progress))
    todo: list[tuple[LabeledQuestion, Answerer]] = []
    try:
        for q in questions:
            doc = data.documents[q.doc_id]
            topic = data.topic(q)
            if detector is not None:
                if q.id in done_detections:
                    skipped += 1
                else:
                    record = _detect(detector, q, doc, topic)
                    store.append_detection(record)
                    errors += record.error is not None
                    done += 1
                bar.update()
            for answerer in answerers:
                if (q.id, answerer.name) in done_responses:
                    skipped += 1
                    bar.update()
                elif execution == "batch":
                    todo.append((q, answerer))
                else:
                    rec = _respond(answerer, q, doc, topic, defusion_judge, refusal_judge)
                    store.append_response(rec)
                    errors += rec.error is not None
                    done += 1
                    bar.update()
        if todo:
            failed = respond_in_batches(
                todo,
                lambda a, q, j, r: _respond(a, q, data.documents[q.doc_id], data.topic(q), j, r),
                store,
                defusion_judge,
                refusal_judge,
                out=out,
                settings=batch,
                bar=bar,
            )
            done, errors = done + len(todo), errors + failed
    finally:
        bar.close()
    logger.info("evaluation: %d steps done, %d already done, %d errors", done, skipped, errors)
    return RunResult(store=store, questions=len(questions), done=done, skipped=skipped, errors=errors)


def _detect(detector: Detector, q: LabeledQuestion, doc: Document, topic: str) -> DetectionRecord:
    base = DetectionRecord(question_id=q.id, doc_id=q.doc_id, topic=topic, label=q.label)
    try:
        verdict = detector.detect(q.question, [doc])
    except LLMConnectionError:
        raise
    except ScopeGuardError as exc:
        logger.warning("detector failed on %s: %s", q.id, exc)
        return base.model_copy(update={"error": _error_text(exc)})
    return base.model_copy(update={"verdict": verdict})


def _respond(
    answerer: Answerer,
    q: LabeledQuestion,
    doc: Document,
    topic: str,
    defusion_judge: DefusionJudge,
    refusal_judge: RefusalJudge | None,
) -> ResponseRecord:
    base = ResponseRecord(
        question_id=q.id,
        doc_id=q.doc_id,
        topic=topic,
        label=q.label,
        prompt=answerer.name,
        question=q.question,
    )
    started = time.perf_counter()
    update: dict[str, Any] = {}
    capped = answerer.truncated if isinstance(answerer, PromptAnswerer) else 0
    try:
        update["response"] = response = answerer.answer(q.question, [doc])
        update["truncated"] = isinstance(answerer, PromptAnswerer) and answerer.truncated > capped
        judged = _judged_text(response)
        if q.label == "out_of_scope":
            update["defusion"] = defusion_judge.judge(q.question, [doc], judged)
        elif refusal_judge is not None:
            update["refusal"] = refusal_judge.judge(q.question, judged)
    except LLMConnectionError:
        raise
    except ScopeGuardError as exc:
        logger.warning("evaluation step %s / %s failed: %s", q.id, answerer.name, exc)
        update["error"] = _error_text(exc)
    update["seconds"] = time.perf_counter() - started
    return base.model_copy(update=update)


_DEFAULTS = RunConfig.model_fields
"""The run settings' defaults: :func:`evaluate`'s keywords take theirs from here (as the CLI does)."""


def evaluate(
    dataset: str | os.PathLike[str],
    *,
    rag: Any,
    out: str | os.PathLike[str],
    judge: str | ChatModel = "local",
    prompts: Sequence[str] = DEFAULT_PROMPTS,
    detector: str | Detector | None = _DEFAULTS["detector"].default,
    limit: int | None = _DEFAULTS["limit"].default,
    votes: int = _DEFAULTS["votes"].default,
    adaptive: bool = _DEFAULTS["adaptive"].default,
    temperature: float = _DEFAULTS["temperature"].default,
    precheck: bool = _DEFAULTS["precheck"].default,
    max_tokens: int | None = _DEFAULTS["max_tokens"].default,
    followup: bool = _DEFAULTS["followup"].default,
    progress: bool | None = None,
    plots: bool = True,
    execution: Execution = "online",
    batch: BatchSettings | None = None,
) -> EvaluationReport:
    """Evaluate a RAG system on a dataset folder and write the report into ``out``.

    The run settings (``detector`` ... ``followup``) default to the :class:`~.store.RunConfig`
    fields of the same name (the CLI's defaults too).

    ``rag`` is an LLM (spec string or :class:`~scopeguard.llm.base.ChatModel`), answered with
    each of ``prompts`` (``basic``, ``two-shot``, ``zero-shot-cot``), or the user's own pipeline
    (callable, LangChain Runnable, LlamaIndex query engine; ``prompts`` is then ignored).
    ``detector`` is a registry name or a detector; ``judge`` it is given the RAG LLM (ELOQ
    Algorithm 2 step 2 asks LLM_r). The same spec for ``rag`` and ``judge`` loads one model.
    ``followup`` gives a judge sample without a verdict one short follow-up turn asking for it
    (scopeguard's addition; ``False`` is the paper's judge). ``execution="batch"`` sends the RAG
    answers and judge votes as Batch API jobs (see the module docstring; ``batch`` sets polling
    and the price factor).
    """
    from scopeguard.detection.detectors.registry import get_detector
    from scopeguard.evaluation.report import write_evaluation_report
    from scopeguard.llm.registry import from_spec

    judge_llm = from_spec(judge)
    if isinstance(rag, (str, ChatModel)):
        rag_llm = judge_llm if rag == judge else from_spec(rag)
        answerers: list[Answerer] = [
            PromptAnswerer(rag_llm, p, max_tokens=max_tokens) for p in dict.fromkeys(prompts)
        ]
        rag_name = rag if isinstance(rag, str) else rag_llm.name
    else:
        answerers = [as_answerer(rag)]
        rag_llm, rag_name = None, f"pipeline:{type(rag).__name__}"
    options = dict(
        votes=votes, temperature=temperature, adaptive=adaptive, max_tokens=max_tokens, followup=followup
    )
    defusion = DefusionJudge(judge_llm, **options)  # type: ignore[arg-type]
    refusal = RefusalJudge(judge_llm, precheck=precheck, **options)  # type: ignore[arg-type]
    det: Detector | None = None
    if isinstance(detector, str):
        kwargs: dict[str, Any] = {}
        if detector == "judge" and rag_llm is not None:  # ELOQ Algorithm 2, step 2: LLM_r judges scope
            kwargs = {"llm": rag_llm, "votes": votes, "adaptive": adaptive, "max_tokens": max_tokens}
        det = get_detector(detector, **kwargs)
    elif detector is not None:
        det = detector
    config = RunConfig(
        dataset=str(dataset),
        rag=rag_name,
        judge=judge if isinstance(judge, str) else judge_llm.name,
        prompts=tuple(a.name for a in answerers),
        detector=None if det is None else (detector if isinstance(detector, str) else det.name),
        votes=votes,
        adaptive=adaptive,
        temperature=temperature,
        precheck=precheck,
        max_tokens=max_tokens,
        limit=limit,
        followup=followup,
    )
    run_evaluation(
        dataset,
        answerers,
        out=out,
        defusion_judge=defusion,
        refusal_judge=refusal,
        detector=det,
        limit=limit,
        config=config,
        progress=progress,
        execution=execution,
        batch=batch,
    )
    return write_evaluation_report(out, plots=plots)


@dataclass(frozen=True)
class EvaluationRunReport:
    """The report of a run folder after :func:`evaluate_config`, and how many of its steps failed."""

    report: EvaluationReport
    steps: int
    failed: int
    store: RunStore


def evaluate_config(
    config: RunConfig,
    out: str | os.PathLike[str],
    *,
    progress: bool | None = None,
    plots: bool = True,
    execution: Execution = "online",
    batch: BatchSettings | None = None,
) -> EvaluationRunReport:
    """Run (or resume) the evaluation ``config`` describes (LLM and detector specs by name) into
    ``out`` and write its report; see :func:`evaluate` (``execution``, ``batch``)."""
    unknown = [p for p in config.prompts if p not in available_rag_prompts()]
    if unknown:
        raise ConfigurationError(
            f"unknown --prompt {', '.join(unknown)}; valid prompts: {', '.join(available_rag_prompts())}"
        )
    if config.votes < 1:
        raise ConfigurationError(f"--votes must be at least 1, got {config.votes}")
    if config.limit is not None and config.limit < 1:
        raise ConfigurationError(f"--limit must be at least 1, got {config.limit}")
    settings = config.model_dump(exclude={"dataset", "rag", "judge", "prompts"})
    report = evaluate(
        config.dataset,
        rag=config.rag,
        judge=config.judge,
        prompts=config.prompts or DEFAULT_PROMPTS,
        out=out,
        progress=progress,
        plots=plots,
        execution=execution,
        batch=batch,
        **settings,
    )
    store = RunStore(out)
    responses, detections = store.responses().values(), store.detections().values()
    failed = sum(r.error is not None for r in responses) + sum(d.error is not None for d in detections)
    return EvaluationRunReport(
        report=report, steps=len(responses) + len(detections), failed=failed, store=store
    )
