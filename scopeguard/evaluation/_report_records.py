"""The records of an evaluation report: one :class:`PromptReport` per RAG prompt and the
:class:`EvaluationReport` of the run (``metrics.json``).

:mod:`scopeguard.evaluation.report` builds and writes them (and publishes them);
:mod:`scopeguard.evaluation.plots` draws them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from scopeguard.evaluation._guarded import GuardedRates, Routes
from scopeguard.evaluation._rates import RateSummary
from scopeguard.evaluation.store import RunConfig

__all__ = ["EvaluationReport", "PromptReport"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PromptReport(_Record):
    prompt: str
    defusion: RateSummary
    false_refusal: RateSummary
    judge_llm_calls: int
    lexical_decisions: int
    truncated_judge_replies: int = 0
    """Judge replies that stopped at the reply cap (each redrawn uncapped when it had no verdict)."""
    truncated_responses: int = 0
    """RAG responses that stopped at the ``max_tokens`` cap (judged as they were cut)."""
    seconds_median: float | None
    explicit_refusal_oos: float | None = None
    """Share of out-of-scope responses that open with an explicit refusal phrase (judge-free check)."""
    explicit_refusal_in: float | None = None
    """The same share for in-scope responses."""
    judge_on_explicit_refusals: tuple[int, int] = (0, 0)
    """Judge sanity check: (judged defused, judged) over out-of-scope responses that open with an
    explicit refusal. A sound judge calls nearly all of them defused."""
    guarded: GuardedRates | None = None
    """The prompt behind the guard (a run with a detector): the detector's verdicts route the
    questions; hedged answers counted as answers and, ``*_with_hedges``, as defused / refused."""


class EvaluationReport(_Record):
    """Every number of a run; written as ``metrics.json``."""

    config: RunConfig
    topics: tuple[str, ...]
    prompts: tuple[PromptReport, ...]
    detection: dict[str, float | None] | None = None
    """``detection_metrics`` of the detector (``None`` for a metric that is undefined, e.g. AUROC)."""
    confusion: dict[str, dict[str, int]] | None = None
    """Detection confusion matrix: gold label -> predicted label -> count."""
    routes: dict[str, Routes] | None = None
    """Gold label -> how the detector's verdicts route the class: refused, hedged, answered."""
    best_prompt: str | None = None
    best_balanced_prompt: str | None = None
    worst_topic: str | None = None
    summary: str = ""

    def prompt(self, name: str) -> PromptReport:
        for p in self.prompts:
            if p.prompt == name:
                return p
        raise KeyError(name)
