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

    python benchmarks/serve.py --detectors fast --bursts 256 2048 --deadline 2 [--new-documents]

``--bursts`` instead sends each burst of N checks at once (N connections, each request written as
prebuilt bytes so that the client costs little) to a fresh
server with ``--deadline``: status counts (only 200s and prompt 429s are right: deadline-aware
admission), how long the 200s and the 429s took, the ``Retry-After`` asked; the rows go to the
same file under ``bursts``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import cpu_model, report

from scopeguard import Guard
from scopeguard.data import atomic_write_json, load_dataset

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


@contextlib.asynccontextmanager
async def _server(
    detector: str, deadline: float, env: dict[str, str], clients: int
) -> AsyncIterator[tuple[httpx.AsyncClient, subprocess.Popen[bytes], dict[str, Any]]]:
    """The real command (``python -m scopeguard serve``) on a free loopback port, ready; a client
    with ``clients`` connections; and a dict that receives the exit code once it has stopped."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "scopeguard", "serve", "--detector", detector, "--port", str(port)]
    command += ["--deadline", str(deadline)]
    ended: dict[str, Any] = {}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **env})
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
                yield c, proc, ended
        finally:
            proc.send_signal(signal.SIGTERM)
            ended["exit_code"] = proc.wait(timeout=60)


async def _served(
    detector: str, pairs: list[Pair], clients: int, seconds: float, deadline: float
) -> dict[str, Any]:
    env = {"SCOPEGUARD_QUEUE_SIZE": str(max(64, clients * 2))}
    async with _server(detector, deadline, env, clients) as (c, proc, ended):
        rss_ready = _rss_mb(proc.pid)
        for doc in dict.fromkeys(d for _, d in pairs):  # warm every document, as in-process
            await c.post("/v1/check", json={"question": "Is this a warm-up question?", "documents": [doc]})

        async def call(pair: Pair) -> bool:
            r = await c.post("/v1/check", json={"question": pair[0], "documents": [pair[1]]})
            return r.status_code == 200 and r.json()["label"] != "unknown"

        row = await _load(call, pairs, clients, seconds)
        row.update(rss_ready_mb=rss_ready, rss_after_mb=_rss_mb(proc.pid))
    row["exit_code"] = ended["exit_code"]
    return row


async def _raw_request(url: httpx.URL, path: str, body: bytes | None) -> tuple[int, dict[str, str]]:
    """One POST (GET without ``body``) on its own connection, written as prebuilt bytes: the
    status and the headers. A
    burst's client must cost little, or it spreads the burst out (httpx, one client with 2,048
    connections, spent 31 CPU-seconds sending one, which the server then saw over 40 s)."""
    host, port = url.host, url.port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        head = f"{'GET' if body is None else 'POST'} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(f"{head}Connection: close\r\n\r\n".encode() + (body or b""))
        await writer.drain()
        status = await reader.readline()
        if not status:
            raise ConnectionResetError("the server closed the connection without a reply")
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        await reader.read()  # the body, to the end of the connection
        return int(status.split()[1]), headers
    finally:
        writer.close()


async def _bursts(
    detector: str, pairs: list[Pair], sizes: list[int], deadline: float, warm: bool
) -> list[dict[str, Any]]:
    """Each burst: ``n`` checks sent at once (``n`` connections) to a fresh server with
    ``deadline``; the status counts, how long 200s and 429s took (as the client and as the server
    timed them), the ``Retry-After`` asked, and how long ``n`` health checks at once took. With
    ``warm``, every document is checked once first (known documents); else they are new to it."""
    rows = []
    for n in sizes:
        async with _server(detector, deadline, {}, n) as (c, _, ended):
            if warm:
                for doc in dict.fromkeys(d for _, d in pairs):
                    warmup = {"question": "Is this a warm-up question?", "documents": [doc]}
                    await c.post("/v1/check", json=warmup)

            bodies = [
                json.dumps({"question": q, "documents": [d]}).encode()
                for q, d in (pairs[i % len(pairs)] for i in range(n))
            ]

            async def one(body: bytes) -> tuple[int | str, float, str | None, float | None]:
                started = time.perf_counter()
                try:
                    code, headers = await _raw_request(c.base_url, "/v1/check", body)
                except OSError as exc:  # counted, never a crash of the benchmark
                    return type(exc).__name__, time.perf_counter() - started, None, None
                took = headers.get("server-timing", "").removeprefix("app;dur=")
                server = float(took) / 1000 if took else None  # the server's own time
                return code, time.perf_counter() - started, headers.get("retry-after"), server

            replies = await asyncio.gather(*(one(body) for body in bodies))

            async def health() -> float:
                started = time.perf_counter()
                with contextlib.suppress(OSError):
                    await _raw_request(c.base_url, "/healthz", None)
                return time.perf_counter() - started

            # the floor: as many requests that do nothing, at once (what the HTTP stack alone costs)
            floor = max(await asyncio.gather(*(health() for _ in range(n))))
        codes: dict[str, int] = {}
        for code, _, _, _ in replies:
            codes[str(code)] = codes.get(str(code), 0) + 1
        ok = [t for code, t, _, _ in replies if code == 200]
        busy = [t for code, t, _, _ in replies if code == 429]
        ok_server = [s for code, _, _, s in replies if code == 200 and s is not None]
        busy_server = [s for code, _, _, s in replies if code == 429 and s is not None]
        after = [int(a) for code, _, a, _ in replies if code == 429 and a is not None]
        rows.append(
            {
                "detector": detector,
                "burst": n,
                "deadline_s": deadline,
                "documents": "known" if warm else "new",
                "codes": codes,
                "ok_p50_s": round(float(np.median(ok)), 3) if ok else None,
                "ok_max_s": round(max(ok), 3) if ok else None,
                "rejected_p50_s": round(float(np.median(busy)), 3) if busy else None,
                "rejected_max_s": round(max(busy), 3) if busy else None,
                "retry_after_s": [min(after), max(after)] if after else None,
                # the same, timed by the server (Server-Timing): from the request reaching it to its reply
                "server_ok_max_s": round(max(ok_server), 3) if ok_server else None,
                "server_rejected_max_s": round(max(busy_server), 3) if busy_server else None,
                "healthz_burst_max_s": round(floor, 3),
                "exit_code": ended["exit_code"],
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }
        )
        print(json.dumps(rows[-1]))
    return rows


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
    ap.add_argument(
        "--bursts", type=int, nargs="*", default=[], help="instead: bursts of N checks sent at once"
    )
    ap.add_argument("--new-documents", action="store_true", help="bursts: documents new to the server")
    args = ap.parse_args()
    pairs = _pairs(args.data, args.min_words, args.max_words, args.pairs)
    if args.bursts:
        detectors = [d.strip() for d in args.detectors.split(",") if d.strip()]
        bursts = [
            row
            for d in detectors
            for row in asyncio.run(_bursts(d, pairs, args.bursts, args.deadline, not args.new_documents))
        ]
        previous = json.loads(RESULT.read_text(encoding="utf-8")) if RESULT.is_file() else {}
        docs = "new" if args.new_documents else "known"
        redone = {(d, docs, n, args.deadline) for d in detectors for n in args.bursts}
        keep = [
            r
            for r in previous.get("bursts", [])
            if (r["detector"], r["documents"], r["burst"], r["deadline_s"]) not in redone
        ]
        previous["bursts"] = keep + bursts
        previous["bursts_machine"] = f"{os.cpu_count()} CPUs, {cpu_model()}"
        atomic_write_json(RESULT, previous)
        return
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
    previous = json.loads(RESULT.read_text(encoding="utf-8")) if RESULT.is_file() else {}
    result = {
        "data": str(args.data),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {cpu_model()}, "
        f"Python {platform.python_version()}",
        **{k: previous[k] for k in ("bursts", "bursts_machine") if k in previous},  # kept
    }
    report(rows, result, RESULT)


if __name__ == "__main__":
    main()
