"""Shared output of the benchmark scripts: a plain table on stdout and a JSON file of the figures,
the CPU's model name (and a timed run's header), a 90th percentile, and a share's 95% interval;
and the known-chunk benchmarks' chunks."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name as ``lscpu`` gives it (figures differ ~7x between the CPUs we run on)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def run_header(benchmark: str) -> dict[str, Any]:
    """The head of a timed benchmark's JSON: its name, the machine (CPU model and cores) and when."""
    return {
        "benchmark": benchmark,
        "machine": f"{cpu_model()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def p90(values: list[float]) -> float:
    """The 90th percentile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, round(0.9 * len(ordered)) - 1)]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of ``k`` successes in ``n`` trials (95% with the default ``z``);
    ``None`` for no trials. Unlike the normal approximation it stays within [0, 1] at 0 or n of n."""
    if n == 0:
        return None
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def settings(pairs: list[str], fields: Any) -> dict[str, Any]:
    """``KEY=VALUE`` pairs of a ``--set`` option as a dict: each value read as JSON if it is JSON,
    else as text; a key that is not one of ``fields`` (a pydantic model's fields) stops the script."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        if key not in fields:
            raise SystemExit(f"unknown setting {key!r}; valid: {', '.join(fields)}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def report(rows: list[dict[str, Any]], result: dict[str, Any], path: Path) -> None:
    """Print ``rows`` as a ``|``-separated table, then write ``result`` (with the rows) to ``path``."""
    cols = list(dict.fromkeys(c for row in rows for c in row))  # a column some rows lack prints empty
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row.get(c, "")) for c in cols))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**result, "rows": rows}, indent=1), encoding="utf-8")
    print(f"wrote {path}")


def earlier_rows(path: Path, here: set[str], key: str = "run") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows ``path`` recorded whose ``key`` is not in ``here`` (measured in an earlier session,
    not again this time), and the whole recorded result (``{}`` when there is none)."""
    if not path.is_file():
        return [], {}
    earlier = json.loads(path.read_text(encoding="utf-8"))
    return [row for row in earlier["rows"] if row[key] not in here], earlier


def eloq_windows(data: Path, words: int = 250, n: int = 8) -> list[tuple[str, str]]:
    """``(doc_id, its first words)`` of the first ``n`` documents of ``data`` (the shared ELOQ dev
    set) with at least ``words`` words: the retrieved chunks of the known-chunk benchmarks."""
    docs = [json.loads(line) for line in (data / "documents.jsonl").open(encoding="utf-8")]
    return [
        (d["doc_id"], " ".join(d["text"].split()[:words])) for d in docs if len(d["text"].split()) >= words
    ][:n]
