"""Does the shipped detector decide the same on another CPU? Per-question scores kept for pairing.

    python benchmarks/cross_cpu.py --work /tmp/scopeguard-cross-cpu

llama.cpp picks its kernels by CPU (AVX2, AVX-512, AMX) and by whether its extra buffer types are
on (the loader's canary turns them off where they crash), so the same GGUF model's margins differ
in the last bits from one machine to the next, and a question near the threshold can change side.
This scores the packaged ``default`` detector (shipped head, no fit) on the held-out human questions
``studies/generation_loop.py`` scores (squad2-train paragraphs the shipped head never saw: 40 "other" and
30 "generation" paragraphs, seed 0), with ``scopeguard eval-detector``, and writes
``benchmarks/results/cross_cpu/<cpu>.json``: the machine (``lscpu`` model name, the CPU features
llama.cpp uses, the loader's extra-buffer decision), the figures per set, and every question's
P(out of scope), verdict and whether it was right, by its SQuAD id (never text). Every other
CPU's file in that folder is then paired with this one, question by question: verdicts that
differ, questions only one CPU gets right (McNemar's exact test), and how far P moved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "studies"))  # generation_loop

from _report import cpu_model, report
from generation_loop import DEFAULT_DATA, evaluate, human_set, mcnemar, split_documents

from scopeguard.data import read_jsonl

RESULTS = Path(__file__).resolve().parent / "results" / "cross_cpu"
SETS = ("other", "generation")


def _machine() -> tuple[dict[str, object], str]:
    """The machine as the loader saw it (its decision records the CPU's features), and a file name."""
    from scopeguard.llamacpp import extra_buffers_decision
    from scopeguard.models import local_gguf

    decision = extra_buffers_decision(local_gguf("qwen2.5-coder-1.5b"))
    features = sorted(f for f in decision.cpu_features if f.startswith(("avx", "amx")))
    slug = re.sub(r"[^a-z0-9]+", "-", cpu_model().lower()).strip("-")
    slug += "-amx" if any(f.startswith("amx") for f in features) else ""
    machine: dict[str, object] = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "features": features,
        "extra_buffers": decision.extra_buffers,
        "extra_buffers_reason": decision.reason,
    }
    return machine, slug


def _score(folder: Path, per_question: Path) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The shipped head's figures, and per question id: [P(out of scope), verdict oos, right]."""
    figures, rows = evaluate(folder, None, "default", per_question)
    return figures, {
        str(r["id"]): [
            round(float(r["score"]), 4),
            r["predicted"] == "out_of_scope",
            r["label"] == r["predicted"],
        ]
        for r in rows
    }


def _pair(mine: dict[str, list[Any]], theirs: dict[str, list[Any]]) -> dict[str, object]:
    """Verdicts that differ, how far P moved, and whether either CPU is right more often (McNemar)."""
    common = sorted(set(mine) & set(theirs))
    diffs = [abs(mine[k][0] - theirs[k][0]) for k in common]
    only_here, only_there, p = mcnemar(
        {k: bool(mine[k][2]) for k in common}, {k: bool(theirs[k][2]) for k in common}
    )
    return {
        "questions": len(common),
        "verdicts_differ": sum(mine[k][1] != theirs[k][1] for k in common),
        "right_here_only": only_here,
        "right_there_only": only_there,
        "mcnemar_p": p,
        "median_abs_diff_p": round(statistics.median(diffs), 4) if diffs else None,
        "max_abs_diff_p": round(max(diffs), 4) if diffs else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-cross-cpu"))
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--note", default="", help="recorded with the figures")
    args = ap.parse_args()

    os.environ["SCOPEGUARD_N_THREADS"] = str(args.threads or os.cpu_count() or 1)
    generation_docs, other_docs = split_documents(args.data, 30, 40, seed=0)
    questions = list(read_jsonl(args.data / "questions.jsonl"))
    machine, slug = _machine()
    result: dict[str, object] = {"benchmark": "cross_cpu", "machine": machine, "note": args.note}
    rows: list[dict[str, object]] = []
    per_set: dict[str, dict[str, list[Any]]] = {}
    for name, docs in zip(SETS, (other_docs, generation_docs), strict=True):
        folder = human_set(args.work / name, docs, questions)
        figures, per_set[name] = _score(folder, args.work / f"{name}-per-question.jsonl")
        rows.append(
            {
                "cpu": machine["cpu"],
                "set": name,
                "n": figures["n"],
                **{m: round(figures[m], 3) for m in ("accuracy", "false_refusal_rate", "auroc")},
            }
        )
    result["scores"] = per_set
    out = RESULTS / f"{slug}.json"
    paired: dict[str, object] = {}
    for other in sorted(RESULTS.glob("*.json")):
        if other == out:
            continue
        theirs = json.loads(other.read_text(encoding="utf-8"))
        paired[other.stem] = {name: _pair(per_set[name], theirs["scores"][name]) for name in SETS}
        for row in rows:
            row[f"acc on {other.stem}"] = next(
                r["accuracy"] for r in theirs["rows"] if r["set"] == row["set"]
            )
    result["paired"] = paired
    report(rows, result, out)
    for name, pairs in paired.items():
        print(f"against {name}: {json.dumps(pairs)}")


if __name__ == "__main__":
    main()
