"""The prompted judge on the dev set: greedy m=1 vs fixed m=3 vs adaptive m=3.

    python benchmarks/judge_voting.py [DATASET_DIR] [--limit 40] [--llm local] [--template oos_judgement]

For each question (a seeded shuffle of the dataset, so ``--limit`` takes a mixed sample):

* ``greedy``: one judgement at temperature 0 (the paper's single "Direct Generate" call);
* ``fixed``: m=3 samples at temperature 0.7, majority vote (self-consistency, no early stop);
* ``adaptive``: m=3 with early stopping. Sampling is seeded per sample index (``seed``,
  ``seed+1``, ``seed+2``), so adaptive voting draws exactly the first samples of the fixed run:
  by default its verdicts are computed by replaying the fixed run's samples through the same
  :func:`scopeguard.voting.vote` (its latency = the time of the samples it used). ``--live-adaptive``
  runs it against the model instead.
* ``followup``: adaptive m=3 with ``JudgeDetector(followup=True)``: a sample without a verdict gets one
  greedy follow-up turn asking for it (scopeguard's addition, off in the paper's judge). The samples are
  replayed from the fixed run like ``adaptive``; only the follow-up turns run against the model
  (``--no-followup`` skips this row).

Per-question results are appended to a JSONL cache (default ``runs/judge_voting/<template>.jsonl``,
outside version control because replies may quote the documents), so a killed run loses nothing
and a re-run resumes. Prints a table and writes ``benchmarks/results/judge_voting[_<template>].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from scopeguard.data import LabeledQuestion, load_dataset
from scopeguard.detection.detectors.judge import JudgeDetector
from scopeguard.evaluation.detection import detection_metrics
from scopeguard.llm import from_spec
from scopeguard.llm.base import BaseChatModel, ChatModel, Completion, Prompt, to_messages
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Verdict

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "eloq-gold-dev"
RESULTS = ROOT / "benchmarks" / "results"
MODES = ("greedy", "fixed", "adaptive", "followup")


class TimedModel(BaseChatModel):
    """Wraps a chat model and records the seconds each sample took (calls are sequential)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.model = inner.name
        self.sample_s: list[float] = []

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        t0 = time.perf_counter()
        out = self.inner.complete(prompt, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
        self.sample_s.extend([(time.perf_counter() - t0) / max(1, len(out.texts))] * len(out.texts))
        return out


class ReplayThenLive(BaseChatModel):
    """Serves single-turn prompts (the judge's samples) from ``raws`` through a scripted model and
    sends conversations (the follow-up turns) to ``live``, timing them."""

    def __init__(self, raws: list[str], live: TimedModel) -> None:
        self.replay, self.live, self.model = ScriptedChatModel(raws), live, live.name
        self.followup_s: list[float] = []

    @property
    def samples_used(self) -> int:
        return sum(call.n for call in self.replay.calls)

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Completion:
        model = self.replay if len(to_messages(prompt)) == 1 else self.live
        self.live.sample_s = []
        out = model.complete(prompt, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
        self.followup_s.extend(self.live.sample_s)
        return out


def _judge(llm: ChatModel, mode: str, args: argparse.Namespace) -> JudgeDetector:
    if mode == "greedy":
        return JudgeDetector(
            llm, votes=1, temperature=0.0, template=args.template, max_tokens=args.max_tokens
        )
    return JudgeDetector(
        llm,
        votes=3,
        temperature=0.7,
        adaptive=mode in ("adaptive", "followup"),
        template=args.template,
        max_tokens=args.max_tokens,
        seed=args.seed,
        followup=mode == "followup",
    )


def _record(q: LabeledQuestion, mode: str, verdict: Verdict, sample_s: list[float]) -> dict[str, Any]:
    return {
        "id": q.id,
        "mode": mode,
        "label": q.label,
        "verdict": verdict.model_dump(mode="json"),
        "sample_s": sample_s,
    }


def _replay_adaptive(q: LabeledQuestion, fixed: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    raws = [v["raw"] for v in fixed["verdict"]["votes"]]
    judge = _judge(ScriptedChatModel(raws), "adaptive", args)
    verdict = judge.detect("replayed question", "replayed document")
    used = fixed["sample_s"][: verdict.llm_calls]
    verdict = verdict.model_copy(update={"latency_ms": 1000.0 * sum(used)})
    return _record(q, "adaptive", verdict, used)


def _replay_followup(
    q: LabeledQuestion, fixed: dict[str, Any], live: TimedModel, doc: Any, args: argparse.Namespace
) -> dict[str, Any]:
    raws = [v["raw"] for v in fixed["verdict"]["votes"]]
    hybrid = ReplayThenLive(raws, live)
    verdict = _judge(hybrid, "followup", args).detect(q.question, [doc])
    used = fixed["sample_s"][: hybrid.samples_used] + hybrid.followup_s
    verdict = verdict.model_copy(update={"latency_ms": 1000.0 * sum(used)})
    return _record(q, "followup", verdict, used)


def run(args: argparse.Namespace) -> dict[str, Any]:
    ds = load_dataset(args.data)
    questions = list(ds.questions)
    random.Random(args.seed).shuffle(questions)
    if args.limit:
        questions = questions[: args.limit]
    cache = Path(args.cache or ROOT / "runs" / "judge_voting" / f"{args.template}.jsonl")
    cache.parent.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if cache.is_file():
        for line in cache.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                done[(rec["id"], rec["mode"])] = rec
    llm = TimedModel(from_spec(args.llm, n_threads=args.threads) if args.threads else from_spec(args.llm))
    live = (
        ["greedy"] if args.greedy_only else ["greedy", "fixed"] + (["adaptive"] if args.live_adaptive else [])
    )
    from tqdm import tqdm

    with cache.open("a") as fh:
        for q in tqdm(questions, desc="judge", disable=None):
            doc = ds.documents[q.doc_id]
            for mode in live:
                if (q.id, mode) in done:
                    continue
                llm.sample_s = []
                verdict = _judge(llm, mode, args).detect(q.question, [doc])
                rec = _record(q, mode, verdict, list(llm.sample_s))
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                done[(q.id, mode)] = rec
            if not args.greedy_only and not args.live_adaptive and (q.id, "adaptive") not in done:
                done[(q.id, "adaptive")] = _replay_adaptive(q, done[(q.id, "fixed")], args)
            if args.followup and not args.greedy_only and (q.id, "followup") not in done:
                rec = _replay_followup(q, done[(q.id, "fixed")], llm, doc, args)
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                done[(q.id, "followup")] = rec
    table: dict[str, dict[str, float]] = {}
    for mode in ("greedy",) if args.greedy_only else MODES[: 4 if args.followup else 3]:
        recs = [done[(q.id, mode)] for q in questions]
        verdicts = [Verdict.model_validate(r["verdict"]) for r in recs]
        m = detection_metrics([r["label"] for r in recs], verdicts)
        m["said_oos_rate"] = sum(v.label == "out_of_scope" for v in verdicts) / len(verdicts)
        table[mode] = m
    return {
        "benchmark": "judge_voting",
        "llm": args.llm,
        "template": args.template,
        "max_tokens": args.max_tokens,
        "n_questions": len(questions),
        "threads": args.threads or "default",
        "adaptive": "live" if args.live_adaptive else "replayed from the fixed run's seeded samples",
        "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.python_version()}",
        "note": "shared 2-core machine under heavy load from other jobs: latencies are upper bounds",
        "results": table,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "data", nargs="?", type=Path, default=Path(os.environ.get("SCOPEGUARD_DEV_DATA", DEFAULT_DATA))
    )
    p.add_argument("--limit", type=int, default=0, help="first N questions of the seeded shuffle (0 = all)")
    p.add_argument("--llm", default="local", help="LLM spec (default: the packaged Qwen2.5-Coder-0.5B)")
    p.add_argument("--template", default="oos_judgement")
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=None)
    p.add_argument("--threads", type=int, default=0, help="llama.cpp threads for local models (0 = default)")
    p.add_argument("--live-adaptive", action="store_true")
    p.add_argument("--greedy-only", action="store_true", help="only the single greedy judgement")
    p.add_argument(
        "--no-followup", dest="followup", action="store_false", help="skip the adaptive + follow-up row"
    )
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    if not (args.data / "questions.jsonl").is_file():
        print(f"dataset not found at {args.data}; skipping")
        return
    report = run(args)
    suffix = "" if args.template == "oos_judgement" else f"_{args.template}"
    suffix += "_greedy" if args.greedy_only else ""
    out = args.out or RESULTS / f"judge_voting{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    cols = ("accuracy", "f1_oos", "auroc", "unknown_rate", "said_oos_rate", "llm_calls_mean")
    print(f"{report['llm']} / {report['template']} / {report['n_questions']} questions ({report['machine']})")
    print(f"{'mode':<10}" + "".join(f"{c:>15}" for c in cols) + f"{'p50 ms':>10}{'p95 ms':>10}")
    for mode, m in report["results"].items():
        cells = "".join(f"{m[c]:>15.3f}" for c in cols)
        print(f"{mode:<10}{cells}{m['latency_ms_p50']:>10.0f}{m['latency_ms_p95']:>10.0f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
