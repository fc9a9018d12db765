"""Evaluate how well a RAG system handles out-of-scope questions (ELOQ Algorithm 2, Table 5).

``evaluate(dataset_dir, rag="local", judge="local", out="runs/x")`` answers every question with
each RAG prompt (or the user's pipeline), judges whether out-of-scope questions were defused and
whether in-scope ones were falsely refused (voted LLM judgements), optionally runs a detector,
stores every record resumably and writes Markdown/CSV tables, ``metrics.json`` and plots.
``compare_runs(a, b)`` puts two runs side by side. ``detection_metrics`` scores detectors;
``read_retrieved`` reads each question against the top-k documents a retriever returns, as in
production, and ``retrieved_metrics`` scores that (``eval-detector --retrieve K``).
"""

from __future__ import annotations

from scopeguard.evaluation._retrieved import (
    RETRIEVED_METRIC_NAMES,
    RetrievedQuestion,
    read_retrieved,
    retrieve_top_k,
    retrieved_metrics,
    retrieved_records,
    retrieved_truth,
)
from scopeguard.evaluation.agreement import (
    DefusionAgreementReport,
    ReviewerAgreement,
    SkippedLabel,
    defusion_agreement,
)
from scopeguard.evaluation.answering import (
    RAG_PROMPTS,
    Answerer,
    PipelineAnswerer,
    PromptAnswerer,
    as_answerer,
    available_rag_prompts,
)
from scopeguard.evaluation.compare import Comparison, ComparisonRow, compare_runs
from scopeguard.evaluation.defusion import DefusionJudge, Judgement, JudgeSample, paper_evaluation_settings
from scopeguard.evaluation.detection import detection_metrics
from scopeguard.evaluation.refusal import RefusalJudge, lexical_refusal
from scopeguard.evaluation.report import (
    EvaluationReport,
    PromptReport,
    RateSummary,
    build_report,
    markdown_report,
    write_evaluation_report,
)
from scopeguard.evaluation.runner import (
    DEFAULT_PROMPTS,
    EvaluationRunReport,
    RunResult,
    evaluate,
    evaluate_config,
    run_evaluation,
    select_questions,
)
from scopeguard.evaluation.store import DetectionRecord, ResponseRecord, RunConfig, RunStore

__all__ = [
    "DEFAULT_PROMPTS",
    "RAG_PROMPTS",
    "RETRIEVED_METRIC_NAMES",
    "Answerer",
    "Comparison",
    "ComparisonRow",
    "DefusionAgreementReport",
    "DefusionJudge",
    "DetectionRecord",
    "EvaluationReport",
    "EvaluationRunReport",
    "JudgeSample",
    "Judgement",
    "PipelineAnswerer",
    "PromptAnswerer",
    "PromptReport",
    "RateSummary",
    "RefusalJudge",
    "ResponseRecord",
    "RetrievedQuestion",
    "ReviewerAgreement",
    "RunConfig",
    "RunResult",
    "RunStore",
    "SkippedLabel",
    "as_answerer",
    "available_rag_prompts",
    "build_report",
    "compare_runs",
    "defusion_agreement",
    "detection_metrics",
    "evaluate",
    "evaluate_config",
    "lexical_refusal",
    "markdown_report",
    "paper_evaluation_settings",
    "read_retrieved",
    "retrieve_top_k",
    "retrieved_metrics",
    "retrieved_records",
    "retrieved_truth",
    "run_evaluation",
    "select_questions",
    "write_evaluation_report",
]
