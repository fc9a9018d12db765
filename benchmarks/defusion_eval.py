"""Defusion and false-refusal rates of an LLM with the three ELOQ RAG prompts (Table 5 style).

    python benchmarks/defusion_eval.py --rag-llm local --judge-llm local --limit 20 --work /tmp/defeval

Runs (or resumes) ``scopeguard.evaluation.evaluate`` on the first ``--limit`` questions of the
label- and topic-balanced order of the dataset (default: the ELOQ gold dev split in ../shared),
into ``--work`` (kept out of the repository: it holds the responses). Prints a table and writes
``benchmarks/results/defusion_eval.json`` with rates, n, unknowns, judge calls and the median
seconds per (question, prompt) step. Only numbers are written, never text.
``--report-only`` writes the figures of whatever the run folder holds (a run that was stopped).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

from scopeguard.evaluation import DEFAULT_PROMPTS, build_report, evaluate

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "eloq-gold-dev"
RESULT = Path(__file__).resolve().parent / "results" / "defusion_eval.json"


def _pct(x: float | None) -> str:
    return "  n/a " if x is None else f"{100 * x:6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rag-llm", default="local")
    parser.add_argument("--judge-llm", default="local")
    parser.add_argument("--prompt", action="append", choices=DEFAULT_PROMPTS)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-defusion-eval"))
    parser.add_argument("--report-only", action="store_true", help="Only summarise the run folder.")
    parser.add_argument("--result", type=Path, default=RESULT)
    args = parser.parse_args()

    if args.report_only:
        report = build_report(args.work)
    else:
        report = evaluate(
            args.data,
            rag=args.rag_llm,
            judge=args.judge_llm,
            prompts=args.prompt or DEFAULT_PROMPTS,
            limit=args.limit,
            votes=args.votes,
            max_tokens=args.max_tokens,
            out=args.work,
        )
    rows = []
    print(
        f"{'prompt':<14} {'defusion %':>10} {'n':>4} {'unk':>4} {'false refusal %':>16} {'n':>4} {'unk':>4}"
    )
    for p in report.prompts:
        d, f = p.defusion, p.false_refusal
        cells = f"{_pct(d.rate):>10} {d.n:>4} {d.unknown:>4} {_pct(f.rate):>16} {f.n:>4} {f.unknown:>4}"
        print(f"{p.prompt:<14} {cells}")
        rows.append(
            {
                "prompt": p.prompt,
                "defusion_rate": d.rate,
                "defusion_n": d.n,
                "defusion_unknown": d.unknown,
                "defusion_errors": d.errors,
                "false_refusal_rate": f.rate,
                "false_refusal_n": f.n,
                "false_refusal_unknown": f.unknown,
                "false_refusal_errors": f.errors,
                "judge_llm_calls": p.judge_llm_calls,
                "lexical_decisions": p.lexical_decisions,
                "seconds_per_step_median": p.seconds_median,
                "defusion_topic_std": d.topic_std,
                "defusion_min_topic": d.min_topic,
                "defusion_max_topic": d.max_topic,
                "explicit_refusal_oos": p.explicit_refusal_oos,
                "explicit_refusal_in_scope": p.explicit_refusal_in,
                "judge_defused_of_explicit_refusals": list(p.judge_on_explicit_refusals),
            }
        )
    print(report.summary)
    result = {
        "config": report.config.model_dump(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus shared with other jobs, "
        f"Python {platform.python_version()}",
        "rows": rows,
        "best_prompt": report.best_prompt,
        "best_balanced_prompt": report.best_balanced_prompt,
        "worst_topic": report.worst_topic,
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.result}")


if __name__ == "__main__":
    main()
