"""``scopeguard serve`` under load on loopback, against the same checks in-process, in one run.

    python benchmarks/serve.py [DATASET_DIR] [--detectors fast,default] [--clients 32] [--seconds 20]

For each detector: the same (question, document) pairs (dataset documents of ``--min-words`` to
``--max-words`` words, every document warmed once first) are checked for ``--seconds`` by
``--clients`` concurrent callers, first in-process (``Guard.acheck`` on one event loop), then
over HTTP against the real command (``python -m scopeguard serve`` in its own process, httpx
clients on loopback: ``POST /v1/check``). Reports throughput, p50/p99 latency, errors (non-200
replies or failed checks: must be 0), the server's overhead as a ratio to in-process (p50 and
throughput) and the server's resident memory once ready and after the load. The load generator
shares the CPUs with the server: on a 2-core box the HTTP figures include its cost. Writes
``benchmarks/results/serve.json`` (a re-run replaces its own detectors' rows). The reading
model serves one escalation at a time, so ``default`` wants fewer clients, fewer pairs and a
longer deadline on a small machine (``--clients 8 --pairs 16 --deadline 300``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import cpu_model, report

from scopeguard import Guard
from scopeguard.data import load_dataset

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "eloq-gold-dev"
RESULT = Path(__file__).resolve().parent / "results" / "serve.json"
Pair = tuple[str, str]


def _pairs(data: Path, min_words: int, max_words: int, limit: int) -> list[Pair]:
    ds = load_dataset(data)
    docs = {k: d.text for k, d in ds.documents.items() if min_words <= len(d.text.split()) <= max_words}
    pairs = [(q.question, docs[q.doc_id]) for q in ds.questions if q.doc_id in docs]
    random.Random(0).shuffle(pairs)
    return pairs[:limit]


async def _load(
    call: Callable[[Pair], Awaitable[bool]], pairs: list[Pair], clients: int, seconds: float
) -> dict[str, Any]:
    """``clients`` callers looping over ``pairs`` for ``seconds``; latency of each call."""
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + seconds

    async def caller(offset: int) -> None:
        nonlocal errors
        i = offset
        while time.perf_counter() < stop:
            started = time.perf_counter()
            ok = await call(pairs[i % len(pairs)])
            latencies.append(time.perf_counter() - started)
            errors += not ok
            i += clients

    started = time.perf_counter()
    await asyncio.gather(*(caller(k) for k in range(clients)))
    elapsed = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    return {
        "requests": len(latencies),
        "errors": errors,
        "throughput_rps": round(len(latencies) / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
    }


async def _in_process(
    detector: str, pairs: list[Pair], clients: int, seconds: float, deadline: float
) -> dict[str, Any]:
    guard = Guard(detector=detector, deadline=deadline)
    for doc in dict.fromkeys(d for _, d in pairs):  # load the models, warm every document
        await guard.acheck("Is this a warm-up question?", [doc])

    async def call(pair: Pair) -> bool:
        return (await guard.acheck(pair[0], [pair[1]])).label != "unknown"

    return await _load(call, pairs, clients, seconds)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


async def _served(
    detector: str, pairs: list[Pair], clients: int, seconds: float, deadline: float
) -> dict[str, Any]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "scopeguard", "serve", "--detector", detector, "--port", str(port)]
    command += ["--deadline", str(deadline)]
    env = {**os.environ, "SCOPEGUARD_QUEUE_SIZE": str(max(64, clients * 2))}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env)
        try:
            limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=300, limits=limits
            ) as c:
                while True:
                    try:
                        if (await c.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if proc.poll() is not None:
                        raise SystemExit(f"the server exited with {proc.returncode}")
                    await asyncio.sleep(0.2)
                rss_ready = _rss_mb(proc.pid)
                for doc in dict.fromkeys(d for _, d in pairs):  # warm every document, as in-process
                    await c.post(
                        "/v1/check", json={"question": "Is this a warm-up question?", "documents": [doc]}
                    )

                async def call(pair: Pair) -> bool:
                    r = await c.post("/v1/check", json={"question": pair[0], "documents": [pair[1]]})
                    return r.status_code == 200 and r.json()["label"] != "unknown"

                row = await _load(call, pairs, clients, seconds)
                row.update(rss_ready_mb=rss_ready, rss_after_mb=_rss_mb(proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            row_exit = proc.wait(timeout=60)
    row["exit_code"] = row_exit
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--detectors", default="fast,default")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--pairs", type=int, default=64, help="distinct (question, document) pairs cycled")
    ap.add_argument("--min-words", type=int, default=150)
    ap.add_argument("--max-words", type=int, default=350)
    ap.add_argument("--deadline", type=float, default=120.0, help="per-check deadline, both modes")
    args = ap.parse_args()
    pairs = _pairs(args.data, args.min_words, args.max_words, args.pairs)
    rows = []
    for detector in [d.strip() for d in args.detectors.split(",") if d.strip()]:
        load_before = os.getloadavg()[0]
        local = asyncio.run(_in_process(detector, pairs, args.clients, args.seconds, args.deadline))
        served = asyncio.run(_served(detector, pairs, args.clients, args.seconds, args.deadline))
        for mode, row in (("in-process", local), ("http", served)):
            rows.append(
                {
                    "detector": detector,
                    "mode": mode,
                    **{k: row[k] for k in ("requests", "errors", "throughput_rps", "p50_ms", "p99_ms")},
                    "p50_ratio": round(row["p50_ms"] / local["p50_ms"], 2),
                    "throughput_ratio": round(row["throughput_rps"] / local["throughput_rps"], 2),
                    "rss_ready_mb": row.get("rss_ready_mb", ""),
                    "rss_after_mb": row.get("rss_after_mb", ""),
                    "exit_code": row.get("exit_code", ""),
                    "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                    "clients": args.clients,
                    "seconds": args.seconds,
                    "pairs": len(pairs),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                }
            )
    # a re-run replaces its own detectors' rows and keeps the others'
    done = {r["detector"] for r in rows}
    if RESULT.is_file():
        kept = [
            r
            for r in json.loads(RESULT.read_text(encoding="utf-8")).get("rows", [])
            if r["detector"] not in done
        ]
        rows = kept + rows
    result = {
        "data": str(args.data),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {cpu_model()}, "
        f"Python {platform.python_version()}",
    }
    report(rows, result, RESULT)


if __name__ == "__main__":
    main()
