"""The real-model tests on a busy machine: pytest beside processes that spin every core.

    python benchmarks/suite_under_load.py --hogs 2 -- tests/test_guard_real_llm.py \\
        tests/llm/test_streaming_real.py tests/verification/test_verify_real_llm.py \\
        tests/detection/read/test_real_backends.py tests/serve/test_admission.py

Each test that reads a real model sets its own deadline (issue #37); this runs them while ``--hogs``
processes at the same priority as pytest spin in a tight loop (a second job on the same cores, the
way a shared CI runner or a developer's laptop is busy), then the same tests on the machine as it is
(``--quiet-too``), and writes the outcome and the wall time of each run to
``benchmarks/results/suite_under_load.json`` with the CPU and the load average.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _report import cpu_model, report

RESULT = Path(__file__).resolve().parent / "results" / "suite_under_load.json"


def _spin(_: int) -> None:
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2147483648


def _pytest(paths: list[str]) -> dict[str, object]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail)}
    return {
        "exit_code": out.returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        **counts,
        "failed_tests": [line for line in out.stdout.splitlines() if line.startswith("FAILED")],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="spinning processes")
    ap.add_argument("--quiet-too", action="store_true", help="also run the tests without the hogs")
    ap.add_argument("--out", type=Path, default=RESULT)
    ap.add_argument("paths", nargs="+", help="test files or folders (after --)")
    args = ap.parse_args()
    rows = []
    hogs = [mp.Process(target=_spin, args=(i,), daemon=True) for i in range(args.hogs)]
    for p in hogs:
        p.start()
    try:
        rows.append({"run": f"{args.hogs} spinning processes", **_pytest(args.paths)})
    finally:
        for p in hogs:
            p.terminate()
        for p in hogs:
            p.join()
    if args.quiet_too:
        rows.append({"run": "no hog", **_pytest(args.paths)})
    report(
        rows,
        {
            "benchmark": "suite_under_load",
            "tests": args.paths,
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count()},
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        args.out,
    )


if __name__ == "__main__":
    main()
