"""GuardClient / AsyncGuardClient against the real server: the Guard interface, remotely."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

from scopeguard import Guard
from scopeguard.client import AsyncGuardClient, GuardClient
from scopeguard.errors import ConfigurationError, InputError, LLMConnectionError
from scopeguard.serve import ServeConfig
from scopeguard.testing import running_guard_server
from tests.serve.conftest import ANSWER, IN_SCOPE, OUT_OF_SCOPE, PARIS


def test_a_client_and_a_local_guard_agree(lexical_server: str) -> None:
    local = Guard(detector="lexical", policy="clarify")
    with GuardClient(lexical_server) as remote:
        for question in (IN_SCOPE, OUT_OF_SCOPE):
            mine, theirs = local.check(question, [PARIS]), remote.check(question, [PARIS])
            assert (theirs.label, theirs.score, theirs.uncovered) == (mine.label, mine.score, mine.uncovered)
            assert remote.decide(theirs) == local.decide(mine)
        out = remote.answer(OUT_OF_SCOPE, [PARIS])
        expected = local.answer(OUT_OF_SCOPE, [PARIS])
        assert (out.action, out.response, out.failed_closed) == (expected.action, expected.response, False)
        assert remote.answer(IN_SCOPE, [PARIS]).response == ANSWER  # the server's upstream LLM
        local_answer = remote.answer(IN_SCOPE, [PARIS], responder=lambda q, docs: f"local: {len(docs)}")
        assert local_answer.response == "local: 1" and local_answer.documents[0].text == PARIS
        assert remote.policy.name == "clarify"
        assert remote.detector.name == "lexical"  # known once the policy was asked


async def test_async_clients(lexical_server: str) -> None:
    async with AsyncGuardClient(lexical_server) as client:
        assert (await client.check(OUT_OF_SCOPE, [PARIS])).label == "out_of_scope"
        assert (await client.answer(IN_SCOPE, [PARIS])).response == ANSWER
        assert (await client.describe())["policy"] == "clarify"
    sync = GuardClient(lexical_server)
    assert (await sync.acheck(IN_SCOPE, [PARIS])).label == "in_scope"
    assert (await sync.aanswer(OUT_OF_SCOPE, [PARIS])).action.value == "clarified"


def test_failures_follow_on_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    closed = GuardClient(down, timeout=5)
    verdict = closed.check(IN_SCOPE, [PARIS])
    assert verdict.label == "unknown" and "could not be reached" in (verdict.error or "")
    assert closed.decide(verdict) == (True, True)
    refused = closed.answer(IN_SCOPE, [PARIS])
    assert refused.failed_closed and refused.action.value == "refused"
    with pytest.raises(LLMConnectionError):
        GuardClient(down, on_error="raise").check(IN_SCOPE, [PARIS])


def test_rejections_raise(lexical_server: str) -> None:
    with pytest.raises(InputError):
        GuardClient(lexical_server).check("   ", [PARIS])  # checked before sending, as Guard does
    config = ServeConfig(detector="lexical", port=0, api_key="right-key", max_documents=1)
    with running_guard_server(config) as url:
        with pytest.raises(ConfigurationError, match="API key"):
            GuardClient(url, api_key="wrong-key").check(IN_SCOPE, [PARIS])
        with pytest.raises(InputError, match="max_documents"):
            GuardClient(url, api_key="right-key").check(IN_SCOPE, [PARIS, PARIS])
        assert repr(GuardClient(url, api_key="right-key")) == f"GuardClient({url!r})"
