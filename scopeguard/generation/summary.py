"""What a generation run did and what its folder holds: :class:`RunSummary`, counted from the
run's checkpoints (one record in memory at a time) by :func:`summarize`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from scopeguard.generation.accounting import PRICES_DATE, Usage
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.generation.corpus import Corpus

__all__ = ["RunSummary", "summarize"]


class RunSummary(BaseModel):
    """What a run did (``*_run``) and what the folder holds now (the rest)."""

    model_config = ConfigDict(frozen=True)

    out_dir: str
    model: str
    mode: str
    execution: str = "online"
    docs_in_corpus: int
    docs_skipped: int
    docs_done_run: int
    docs_resumed: int
    docs_failed: int
    docs_errored_run: int
    docs_done: int
    oos_kept: int
    oos_filtered: int
    in_scope: int
    # finished documents with both kinds of question, and those missing one (their checkpoints say why)
    docs_with_both: int = 0
    docs_without_oos: int = 0
    docs_without_in_scope: int = 0
    # documents an offline mode found unusable (empty, one sentence, not English, longer than the
    # model's context): no questions, a reason in their checkpoints (``error``)
    docs_unusable: int = 0
    # kept questions of either label taken from within the filter's margin to bring a short
    # document up to its minimum (the offline modes), counted in the totals above
    filled: int = 0
    # kept out-of-scope questions the filter found answerable, asking for a detail their document
    # states none of (the offline modes), counted in the totals above
    absent: int = 0
    usage_run: Usage
    usage_total: Usage
    cost_usd_run: float | None
    cost_usd_total: float | None
    seconds: float

    def table(self) -> str:
        cost = (
            f"${self.cost_usd_run:.4f} this run, ${self.cost_usd_total:.4f} in total "
            f"(estimate, prices of {PRICES_DATE}"
            + (", Batch API price factor applied)" if self.execution == "batch" else ")")
            if self.cost_usd_run is not None and self.cost_usd_total is not None
            else "n/a (no price for this model)"
        )
        u, t = self.usage_run, self.usage_total
        rows = [
            ("output", self.out_dir),
            ("model / mode", f"{self.model} / {self.mode} ({self.execution})"),
            (
                "documents",
                f"{self.docs_done} done ({self.docs_done_run} this run, {self.docs_resumed} resumed), "
                f"{self.docs_skipped} skipped, {self.docs_unusable} unusable, {self.docs_failed} failed, "
                f"{self.docs_errored_run} errored this run",
            ),
            (
                "questions",
                f"{self.oos_kept} out-of-scope kept, {self.oos_filtered} filtered, {self.in_scope} in-scope"
                + (
                    f" ({self.filled} kept from within the filter's margin to fill short documents: "
                    "provenance.filled)"
                    if self.filled
                    else ""
                )
                + (
                    f" ({self.absent} out-of-scope kept though the filter found them answerable: "
                    "their documents state no such detail, provenance.absent_detail)"
                    if self.absent
                    else ""
                ),
            ),
            (
                "coverage",
                f"{self.docs_with_both} of {self.docs_done} done documents have both kinds "
                f"({self.docs_without_oos} without an out-of-scope question, "
                f"{self.docs_without_in_scope} without an in-scope one)",
            ),
            (
                "LLM calls",
                f"{u.calls - u.cached} new + {u.cached} cached this run; {t.calls} in total; "
                f"{u.truncated} replies cut at the token cap this run ({t.truncated} in total)",
            ),
            (
                "tokens",
                f"{u.prompt_tokens} prompt + {u.completion_tokens} completion this run; "
                f"{t.total_tokens} in total",
            ),
            ("cost", cost),
            ("time", f"{self.seconds:.1f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def summarize(
    store: CheckpointStore,
    *,
    out: Path,
    model: str,
    mode: str,
    execution: str,
    corpus: Corpus,
    results: list[tuple[str, Usage]],
    resumed: int,
    errored: int,
    seconds: float,
    cost: Callable[[Usage], float | None],
) -> RunSummary:
    """The summary of a run that finished ``results`` (status and usage per document it worked on)
    over ``corpus``, with the folder's totals read from ``store``; ``cost`` prices a usage."""
    usage_run = Usage.total(u for _, u in results)
    usage_total, n = Usage(), Counter[str]()
    for r in store.iter_records():  # one record in memory at a time
        usage_total += r.total_usage
        n[r.status] += 1
        n.update(q.label for q in r.questions)
        n["filled"] += sum(bool(q.filled) for q in r.questions)
        n["absent"] += sum(q.absent_detail is not None for q in r.questions)
        n["dropped"] += len(r.dropped)
        if r.status == "done":
            has_oos, has_ins = r.count("out_of_scope") > 0, r.count("in_scope") > 0
            n["docs_with_both"] += has_oos and has_ins
            n["docs_without_oos"] += not has_oos
            n["docs_without_in_scope"] += not has_ins
    return RunSummary(
        out_dir=str(out),
        model=model,
        mode=mode,
        execution=execution,
        docs_in_corpus=len(corpus.documents) + len(corpus.skipped),
        docs_skipped=len(corpus.skipped),
        docs_done_run=sum(st == "done" for st, _ in results),
        docs_resumed=resumed,
        docs_failed=n["failed"],
        docs_errored_run=errored,
        docs_done=n["done"],
        oos_kept=n["out_of_scope"],
        oos_filtered=n["dropped"],
        in_scope=n["in_scope"],
        docs_with_both=n["docs_with_both"],
        docs_without_oos=n["docs_without_oos"],
        docs_without_in_scope=n["docs_without_in_scope"],
        docs_unusable=n["skipped"],
        filled=n["filled"],
        absent=n["absent"],
        usage_run=usage_run,
        usage_total=usage_total,
        cost_usd_run=cost(usage_run),
        cost_usd_total=cost(usage_total),
        seconds=seconds,
    )
