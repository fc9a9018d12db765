"""``scopeguard demo``: the main job, offline, on embedded defaults."""

from __future__ import annotations

import importlib.util
import json
import textwrap
import time

import typer

from scopeguard.cli._app import command


@command("demo")
def demo(
    detector: str = typer.Option("default", "--detector", help="Detector name."),
    policy: str = typer.Option("clarify", "--policy", help="refuse | clarify | defuse | flag."),
    llm: str = typer.Option(
        "auto",
        "--llm",
        help="Answering LLM spec; 'auto' = the packaged local model if installed; 'none' = quote.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per question."),
) -> None:
    """Guard a small RAG over a shipped corpus: in-scope questions answered, out-of-scope ones defused."""
    from scopeguard.demo import iter_demo

    if llm == "auto":
        llm = "local" if importlib.util.find_spec("llama_cpp") else "none"
    started = time.perf_counter()

    def progress(message: str) -> None:
        typer.echo(f"[{time.perf_counter() - started:5.1f} s] {message} ...", err=True)

    cases = iter_demo(detector=detector, policy=policy, llm=None if llm == "none" else llm, progress=progress)
    if not as_json:
        typer.echo(f"scopeguard demo: detector={detector}, policy={policy}, llm={llm}\n")
    answered = total = 0
    for i, c in enumerate(cases, 1):
        total += 1
        answered += c.result.action.value == "answered"
        if as_json:
            typer.echo(
                json.dumps(
                    {"expected": c.expected, **c.result.model_dump(mode="json", exclude={"documents"})}
                )
            )
            continue
        v = c.result.verdict
        score = "n/a" if v.score is None else f"{v.score:.2f}"
        typer.echo(f"[{i}] Q: {c.question}")
        typer.echo(f"    retrieved: {', '.join(d.id for d in c.result.documents)}")
        typer.echo(
            f"    verdict: {v.label} (p_oos={score}, {v.latency_ms:.0f} ms"
            + (", escalated" if v.escalated else "")
            + f")   expected: {c.expected}"
        )
        if v.uncovered:
            typer.echo(f"    not covered: {', '.join(v.uncovered)}")
        typer.echo(f"    action: {c.result.action.value}")
        typer.echo(textwrap.indent(textwrap.fill(c.result.response or "", 96), "    > "))
        typer.echo("")
    if not as_json:
        elapsed = time.perf_counter() - started
        typer.echo(f"{answered} answered, {total - answered} defused, in {elapsed:.1f} s")
