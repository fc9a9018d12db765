"""The AIMD limiter: grows while latency holds, halves on 429s (through the model's counter/hook) and
on rising latency; ``Generator(concurrency="auto")`` uses it against a rate-limiting fake server."""

from __future__ import annotations

import asyncio

import pytest

from scopeguard.errors import ConfigurationError
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.llm.concurrency import AdaptiveLimiter, LimitedChatModel
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.testing import EloqChatModel, FakeOpenAIServer, ScriptedChatModel, invented_document


async def _load(limiter: AdaptiveLimiter, n: int, latency: float, capacity: int | None = None) -> list[int]:
    """``n`` requests of ``latency`` s; above ``capacity`` in flight one counts as a 429."""
    limits: list[int] = []

    async def one() -> None:
        async with limiter.slot():
            if capacity is not None and limiter.in_flight > capacity:
                limiter.on_rate_limit()
            await asyncio.sleep(latency)
            limits.append(limiter.limit)

    await asyncio.gather(*(one() for _ in range(n)))
    return limits


def test_slow_start_grows_to_the_maximum_while_latency_holds() -> None:
    limiter = AdaptiveLimiter(initial=2, maximum=64)
    asyncio.run(_load(limiter, 600, 0.02))
    assert limiter.peak == 64


def test_rate_limits_halve_the_limit_once_per_round_trip() -> None:
    limiter = AdaptiveLimiter(initial=4, maximum=256)
    limits = asyncio.run(_load(limiter, 1500, 0.02, capacity=40))
    assert limiter.decreases >= 1
    assert limiter.peak > 40  # it probed past the capacity...
    assert limits[-1] <= 2 * 40  # ...and settled around it, not at the maximum
    assert limiter.decreases < 200  # not once per rejected request


def test_rising_latency_backs_off() -> None:
    limiter = AdaptiveLimiter(initial=32, maximum=64)

    async def run() -> None:
        await _load(limiter, 64, 0.01)
        await _load(limiter, 64, 0.1)  # the server starts queueing: 10x the latency

    asyncio.run(run())
    assert limiter.decreases >= 1 and limiter.limit < 64


def test_latency_that_rises_while_the_rate_still_grows_does_not_back_off() -> None:
    """A client whose own loop slows with load: latency grows with the requests in flight but so
    does the completion rate, up to a plateau; the limit climbs there instead of halving early."""
    limiter = AdaptiveLimiter(initial=4, maximum=256)

    async def one() -> None:
        async with limiter.slot():
            await asyncio.sleep(0.004 + 0.00004 * limiter.in_flight)  # rate plateaus near 25,000/s

    async def run() -> None:
        await asyncio.gather(*(one() for _ in range(6000)))

    asyncio.run(run())
    assert limiter.peak >= 128  # halving at 2x the first latency would have stopped near 100
    assert limiter.limit >= limiter.peak // 2


def test_the_counter_of_an_openai_model_is_a_rate_limit_signal() -> None:
    seen: list[float | None] = []
    with FakeOpenAIServer(EloqChatModel(), capacity=2, retry_after=0.01, latency=0.02) as server:
        # Up to 8 requests contend for 2 places until the limit comes down, and a request's retry
        # can lose every race while others are served: 8 attempts ran out once in CI on a busy
        # machine. The test is about the signal, not about starving, so attempts are plenty.
        model = OpenAIChatModel("m", base_url=server.base_url, max_attempts=100, on_rate_limit=seen.append)
        limiter = AdaptiveLimiter(initial=8, rate_limits=lambda: model.rate_limits)
        limited = LimitedChatModel(model, limiter)

        async def run() -> None:
            prompt = "Please list 2 most important facts:"
            await asyncio.gather(*(limited.acomplete(prompt) for _ in range(24)))

        asyncio.run(run())
    assert server.rate_limited > 0 and model.rate_limits == len(seen) > 0
    assert seen[0] == pytest.approx(0.01)  # the Retry-After the server sent
    assert limiter.decreases >= 1 and limiter.limit < 8


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        AdaptiveLimiter(initial=0)
    with pytest.raises(ConfigurationError):
        Generator(ScriptedChatModel(["x"]), concurrency="fast")  # type: ignore[arg-type]


def test_generator_auto_concurrency_gives_the_fixed_runs_dataset(tmp_path: object) -> None:
    corpus = [{"id": f"d{i}", "text": invented_document(f"t{i}")} for i in range(4)]
    config = GenerationConfig(mode="efficient", rounds=1, n_in_scope=1)
    with FakeOpenAIServer(EloqChatModel(), capacity=3, retry_after=0.01, latency=0.02) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, max_attempts=100)  # no starving (above)
        auto = Generator(model, config=config, concurrency="auto", progress=False)
        fixed = Generator(model, config=config, concurrency=2, progress=False)
        a = auto.run(corpus, tmp_path / "auto")  # type: ignore[operator]
        f = fixed.run(corpus, tmp_path / "fixed")  # type: ignore[operator]
    assert a.docs_done == f.docs_done == 4 and (a.oos_kept, a.in_scope) == (f.oos_kept, f.in_scope)
    assert server.rate_limited > 0 and model.rate_limits == server.rate_limited


def test_a_cancelled_waiter_does_not_keep_a_slot() -> None:
    limiter = AdaptiveLimiter(initial=1, minimum=1, maximum=1)

    async def run() -> list[str]:
        order: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with limiter.slot():
                order.append("a")
                await release.wait()

        async def waiter(name: str) -> None:
            async with limiter.slot():
                order.append(name)

        a = asyncio.create_task(holder())
        await asyncio.sleep(0)
        b = asyncio.create_task(waiter("b"))
        c = asyncio.create_task(waiter("c"))
        await asyncio.sleep(0)
        b.cancel()
        release.set()
        await asyncio.gather(a, c)
        assert b.cancelled() and limiter.in_flight == 0
        return order

    assert asyncio.run(run()) == ["a", "c"]
