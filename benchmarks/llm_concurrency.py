"""Adaptive concurrency (``scopeguard.llm.concurrency.AdaptiveLimiter``) against endpoints with a set latency.

    python benchmarks/llm_concurrency.py [--requests 30000] [--latency 0.05 0.5] [--http-requests 1000]

Two kinds of endpoint, both answering after ``--latency`` seconds and rejecting a request with a
429 (``Retry-After``) above ``capacity`` requests in flight:

- ``scheduler``: an in-process endpoint (``asyncio.sleep``): what the limiter itself achieves, with
  no HTTP cost. Ideal rate = min(256, capacity) / latency.
- ``http``: ``OpenAIChatModel`` (the SDK, retries, the ``rate_limits`` counter the limiter watches)
  against :class:`scopeguard.testing.FakeOpenAIServer` on 127.0.0.1: includes the client's and the
  threaded fake server's CPU cost, which on a small machine caps the rate well below the ideal.

Rows: a fixed limit of 256 (the old semaphore) and ``auto`` (the limiter, max 256), without and
with a capacity. Prints a table; writes ``benchmarks/results/llm_concurrency.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time
from pathlib import Path
from typing import Any

from _report import report

from scopeguard.llm.concurrency import AdaptiveLimiter, LimitedChatModel
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.testing import FakeOpenAIServer, ScriptedChatModel

RESULT = Path(__file__).resolve().parent / "results" / "llm_concurrency.json"
TARGET = 256


class _RateLimited(Exception):
    pass


class _Endpoint:
    """In-process endpoint: ``latency`` s per request, a 429 above ``capacity`` in flight."""

    def __init__(self, latency: float, capacity: int | None, retry_after: float) -> None:
        self.latency, self.capacity, self.retry_after = latency, capacity, retry_after
        self.in_flight = self.rejected = 0

    async def call(self, limiter: AdaptiveLimiter | None, semaphore: asyncio.Semaphore | None) -> None:
        while True:
            slot = limiter.slot() if limiter is not None else semaphore
            assert slot is not None
            try:
                async with slot:
                    self.in_flight += 1
                    try:
                        if self.capacity is None or self.in_flight <= self.capacity:
                            await asyncio.sleep(self.latency)
                            return
                        self.rejected += 1
                        if limiter is not None:
                            limiter.on_rate_limit(self.retry_after)
                        raise _RateLimited  # a failed request: no latency sample
                    finally:
                        self.in_flight -= 1
            except _RateLimited:
                await asyncio.sleep(self.retry_after)  # the client's wait before its retry


def _limiter(**kwargs: Any) -> AdaptiveLimiter:
    return AdaptiveLimiter(maximum=TARGET, **kwargs)  # the defaults: start at 32, x0.7 on a 429


async def _scheduler(n: int, latency: float, capacity: int | None, auto: bool) -> dict[str, Any]:
    endpoint = _Endpoint(latency, capacity, retry_after=latency)
    limiter = _limiter() if auto else None
    semaphore = None if auto else asyncio.Semaphore(TARGET)
    started = time.perf_counter()
    await asyncio.gather(*(endpoint.call(limiter, semaphore) for _ in range(n)))
    seconds = time.perf_counter() - started
    return _row("scheduler", n, seconds, latency, capacity, auto, endpoint.rejected, limiter)


async def _http(n: int, latency: float, capacity: int | None, auto: bool) -> dict[str, Any]:
    with FakeOpenAIServer(ScriptedChatModel(lambda p: "ok"), latency=latency, capacity=capacity) as server:
        model = OpenAIChatModel("fake", base_url=server.base_url, max_attempts=20, backoff=latency)
        limiter = _limiter(rate_limits=lambda: model.rate_limits) if auto else None
        semaphore = asyncio.Semaphore(TARGET)

        async def one() -> None:
            if limiter is not None:
                await LimitedChatModel(model, limiter).acomplete("hi")
            else:
                async with semaphore:
                    await model.acomplete("hi")

        await asyncio.gather(*(one() for _ in range(min(n, 200))))  # warm the connection pool
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        seconds = time.perf_counter() - started
        return _row("http", n, seconds, latency, capacity, auto, server.rate_limited, limiter)


def _row(
    kind: str,
    n: int,
    seconds: float,
    latency: float,
    capacity: int | None,
    auto: bool,
    rejected: int,
    limiter: AdaptiveLimiter | None,
) -> dict[str, Any]:
    ideal = min(TARGET, capacity or TARGET) / latency
    return {
        "endpoint": kind,
        "latency_s": latency,
        "limit": "auto" if auto else f"fixed {TARGET}",
        "capacity": capacity or "none",
        "requests": n,
        "req_per_s": round(n / seconds, 1),
        "ideal_req_per_s": round(ideal, 1),
        "pct_of_ideal": round(100 * n / seconds / ideal, 1),
        "429s": rejected,
        "final_limit": limiter.limit if limiter else TARGET,
        "decreases": limiter.decreases if limiter else 0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=30000, help="requests per scheduler row")
    ap.add_argument("--http-requests", type=int, default=0, help="requests per HTTP row (0: skip)")
    ap.add_argument(
        "--latency",
        type=float,
        nargs="+",
        default=[0.05, 0.5],
        help="endpoint latencies (s): 0.05 shows the client's own CPU limit, 0.5 a real LLM's",
    )
    ap.add_argument("--capacity", type=int, default=128, help="429 above this many in flight")
    args = ap.parse_args()
    rows = []
    for latency in args.latency:
        for capacity in (None, args.capacity):
            for auto in (False, True):
                rows.append(asyncio.run(_scheduler(args.requests, latency, capacity, auto)))
        if args.http_requests:
            for capacity in (None, args.capacity):
                for auto in (False, True):
                    rows.append(asyncio.run(_http(args.http_requests, latency, capacity, auto)))
    result = {
        "settings": vars(args) | {"target_in_flight": TARGET},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "rows": rows,
    }
    report(rows, result, RESULT)


if __name__ == "__main__":
    main()
