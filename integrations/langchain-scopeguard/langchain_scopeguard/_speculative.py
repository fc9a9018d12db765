"""Glue for a speculative answer in LangChain: the chain run outside the trace, its usage counted,
and its outcome traced as a ``ScopeGuardSpeculation`` child run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.callbacks import Callbacks
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import var_child_runnable_config

from langchain_scopeguard._common import traced
from scopeguard._speculation import Held, Tally, speculation_metadata

__all__ = [
    "SPECULATION_RUN_NAME",
    "atrace_speculation",
    "count_usage",
    "detached",
    "settle",
    "trace_speculation",
    "untraced",
]

SPECULATION_RUN_NAME = "ScopeGuardSpeculation"
"""The traced child run that records a speculative answer's outcome (and a dropped one's cost)."""


def detached(config: RunnableConfig) -> RunnableConfig:
    """``config`` without its callbacks: a speculative answer runs outside the caller's trace and
    event stream (``astream_events``), which would otherwise show an answer the verdict drops."""
    out: dict[str, Any] = {k: v for k, v in config.items() if k not in ("run_id", "run_name")}
    out["callbacks"] = []  # not None: None would inherit the parent run's from the context
    return out  # type: ignore[return-value]


T = TypeVar("T")


def untraced(produce: Callable[[Tally], T]) -> Callable[[Tally], T]:
    """``produce`` run where no parent run is current: the speculative answer's thread or task
    starts from a copy of the caller's context, whose current run would lend its callbacks to any
    LangChain object called inside (the guard's LLM, when it is a LangChain chat model)."""

    def run(tally: Tally) -> T:
        var_child_runnable_config.set(None)  # in the thread's or the task's own copy of the context
        return produce(tally)

    return run


def count_usage(tally: Tally, output: Any) -> None:
    """Add the output tokens a chat model's message (or chunk) reports to ``tally``."""
    usage = getattr(output, "usage_metadata", None) if isinstance(output, BaseMessage) else None
    tokens = usage.get("output_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and tokens > 0:
        tally.add_tokens(tokens)


def _config(record: dict[str, Any], callbacks: Callbacks) -> RunnableConfig:
    metadata = {
        "scopeguard_speculation": record["outcome"],
        "scopeguard_discarded_tokens": record.get("tokens"),
        "scopeguard_discarded_seconds": record.get("seconds"),
    }
    tags = [f"scopeguard:speculation:{record['outcome']}"]
    return {"metadata": metadata, "tags": tags, "callbacks": callbacks}


def settle(held: Held | None) -> dict[str, Any] | None:
    """The speculation record of ``held`` (``None`` without one): released, or discarded now."""
    return speculation_metadata(held).get("speculation")


def _run() -> RunnableLambda[dict[str, Any], dict[str, Any]]:
    def record(value: dict[str, Any]) -> dict[str, Any]:
        return value

    return RunnableLambda(record, name=SPECULATION_RUN_NAME)


def trace_speculation(callbacks: Callbacks, record: dict[str, Any] | None) -> None:
    """Record a speculative answer's outcome (``record``: ``{"outcome", ...cost}``) as a
    ``ScopeGuardSpeculation`` child run of ``callbacks``' parent run."""
    if record is not None and traced(callbacks):
        _run().invoke(record, _config(record, callbacks))


async def atrace_speculation(callbacks: Callbacks, record: dict[str, Any] | None) -> None:
    """The async twin of :func:`trace_speculation`."""
    if record is not None and traced(callbacks):
        await _run().ainvoke(record, _config(record, callbacks))
