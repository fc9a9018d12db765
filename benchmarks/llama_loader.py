"""The llama.cpp loader on this machine: the canary's verdict and the read speed with llama.cpp's
extra buffer types (weight repacking, AMX) on and off, side by side in one run.

    python benchmarks/llama_loader.py [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b] [--tokens 320]
        [--repeats 3] [--threads N]

For each model: the canary is run afresh in a child process (as on a new machine); then the same
``--tokens``-token prompt is read from an empty context ``--repeats`` times with extra buffers
off and, only where the canary passed, on (the order alternates per model). A model whose canary
failed is not loaded with extra buffers here either: that load is what crashes. Reports the
median tokens/s of each and their ratio. Writes ``benchmarks/results/llama_loader.json``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from _report import report

from scopeguard.llamacpp import (
    cpu_features,
    cpu_name,
    extra_buffers_decision,
    llama_cpp_build,
    measure_read_speed,
)
from scopeguard.models import local_gguf

RESULT = Path(__file__).resolve().parent / "results" / "llama_loader.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="qwen2.5-coder-1.5b,qwen2.5-coder-0.5b")
    ap.add_argument("--tokens", type=int, default=320)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    os.environ.pop("SCOPEGUARD_LLAMA_EXTRA_BUFFERS", None)
    rows = []
    for i, name in enumerate(args.models.split(",")):
        path = local_gguf(name)
        decision = extra_buffers_decision(path, recheck=True)
        canary = decision.canary
        speeds = {}
        settings = [False, True] if decision.extra_buffers else [False]
        for extra in settings if i % 2 == 0 else settings[::-1]:
            speeds[extra] = measure_read_speed(
                path, extra_buffers=extra, tokens=args.tokens, repeats=args.repeats, n_threads=args.threads
            )
        off, on = speeds[False], speeds.get(True)
        rows.append(
            {
                "model": name,
                "canary": "passed" if decision.extra_buffers else "failed",
                "canary_s": canary.seconds if canary else None,
                "canary_detail": canary.detail if canary else decision.reason,
                "tokens": off.tokens,
                "threads": off.n_threads,
                "extra_off_tok_s": off.tokens_per_s,
                "extra_on_tok_s": on.tokens_per_s if on else None,
                "on_over_off": round(on.tokens_per_s / off.tokens_per_s, 3) if on else None,
                "off_seconds": off.seconds,
                "on_seconds": on.seconds if on else None,
            }
        )
    version, system_info = llama_cpp_build()
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.machine()}",
        "cpu_features": list(cpu_features()),
        "llama_cpp_python": version,
        "llama_cpp_system_info": system_info,
        "load_average_1m": os.getloadavg()[0],
        "command": "python benchmarks/llama_loader.py "
        + " ".join(f"--{k} {v}" for k, v in vars(args).items() if v is not None),
    }
    report(rows, result, RESULT)


if __name__ == "__main__":
    main()
