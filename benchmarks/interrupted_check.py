"""A Ctrl-C during a check: does it stop the check, and does the guard read right after it?

    python benchmarks/interrupted_check.py [--delays 0.5,1,1.5]

In one process with a fresh ``$SCOPEGUARD_CACHE``: ``Guard(detector="default")`` checks a question
on 4 chunks of ELOQ news (250 words each) once to load and pre-read, then a new question with a SIGINT
sent to the process after each delay (seconds), and each of those questions once more afterwards.
A second process asks each question once, with no signal: an interrupted question's next check
should read as a first one (a question checked again finds its whole prompt's state kept, which
moves P(out of scope) by a few thousandths).
Prints whether ``KeyboardInterrupt`` reached the caller and how long after the signal, and each
question's P(out of scope) after the interrupt against the fresh process's; writes
``benchmarks/results/interrupted_check.json`` with the CPU named. Before the fix the signal was
raised inside llama.cpp's eval callback, where ctypes dropped it: the check went on and failed
closed ("computed no tensor for layers [21]").
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import cpu_model, eloq_windows

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "eloq-gold-dev"
RESULT = ROOT / "benchmarks" / "results" / "interrupted_check.json"
QUESTIONS = (
    "Who won the match yesterday?",
    "What did the company report for the last quarter?",
    "When will the new rules take effect?",
    "How many people were affected?",
    "What is the name of the new chief executive?",
)


def child(mode: str, delays: list[float]) -> dict[str, Any]:
    from scopeguard import Guard

    guard = Guard(detector="default")
    texts = [text for _, text in eloq_windows(DATA, n=4)]
    guard.check("What is this about?", texts)  # loads the reader and pre-reads the chunks
    out: dict[str, Any] = {"interrupts": [], "after": {}}
    asked = QUESTIONS[: len(delays)]
    for delay, question in zip(delays, asked, strict=True) if mode == "interrupt" else ():
        sent: list[float] = []

        def send(sent: list[float] = sent) -> None:
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Timer(delay, send)
        timer.start()
        try:
            result = guard.check(question, texts)
            out["interrupts"].append({"delay": delay, "raised": False, "label": result.label})
        except KeyboardInterrupt:
            late = time.perf_counter() - sent[0] if sent else None
            out["interrupts"].append({"delay": delay, "raised": True, "seconds_after_signal": late})
        timer.cancel()
    for question in asked:
        result = guard.check(question, texts)
        out["after"][question] = {"label": result.label, "score": result.score}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", default="0.5,1,1.5")
    ap.add_argument("--out", type=Path, default=RESULT)
    ap.add_argument("--child", choices=("interrupt", "fresh"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    delays = [float(d) for d in args.delays.split(",")]
    if args.child:
        print(json.dumps(child(args.child, delays)))
        return
    if not (DATA / "documents.jsonl").is_file():
        raise SystemExit(f"needs the shared ELOQ dev set at {DATA}")
    runs = {}
    for mode in ("interrupt", "fresh"):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "SCOPEGUARD_CACHE": cache}
            argv = [sys.executable, __file__, "--child", mode, "--delays", args.delays]
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
            runs[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{cpu_model()}: SIGINT during a check of 4 known chunks")
    for i in runs["interrupt"]["interrupts"]:
        said = f"raised {i['seconds_after_signal']:.2f} s after the signal" if i["raised"] else "not raised"
        print(f"  after {i['delay']:.1f} s: KeyboardInterrupt {said}")
    for q, got in runs["interrupt"]["after"].items():
        ref = runs["fresh"]["after"][q]
        print(f"  {q!r}: {got['label']} {got['score']:.4f}; uninterrupted {ref['label']} {ref['score']:.4f}")
    args.out.write_text(json.dumps({"machine": cpu_model(), "delays": delays, **runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
