"""GuardClient with ``speculative=True``: the caller's responder starts beside the server's check
and its answer is held until the verdict. The server's detector answers only once the responder
has started (events, never timings: server and test share the process)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs scopeguard[serve]")
pytest.importorskip("uvicorn", reason="needs scopeguard[serve]")
pytest.importorskip("prometheus_client", reason="needs scopeguard[serve]")
pytest.importorskip("httpx", reason="needs scopeguard[serve]")

from scopeguard import Action, Document
from scopeguard.client import AsyncGuardClient, GuardClient
from scopeguard.serve import ServeConfig
from scopeguard.testing import ScriptedDetector, running_guard_server
from tests.serve.conftest import IN_SCOPE, OUT_OF_SCOPE, PARIS

SECRET = "A speculative answer the user must never see"
WAIT = 10.0  # a bound on waiting for an event the test's own flow sets (never reached)
STARTED = threading.Event()


def _verdict(question: str) -> str:
    assert STARTED.wait(WAIT), "the responder did not start before the verdict"
    return "out_of_scope" if question == OUT_OF_SCOPE else "in_scope"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    config = ServeConfig(port=0, preload=False, policy="refuse")
    with running_guard_server(config, detector=ScriptedDetector(_verdict)) as url:
        yield url


def _responder(text: str) -> Any:
    STARTED.clear()
    calls: list[str] = []

    def answer(question: str, documents: Sequence[Document]) -> str:
        calls.append(question)
        STARTED.set()
        return text

    answer.calls = calls  # type: ignore[attr-defined]
    return answer


def test_in_scope_uses_the_held_local_answer(server: str) -> None:
    responder = _responder("local answer")
    with GuardClient(server, speculative=True) as client:
        result = client.answer(IN_SCOPE, [PARIS], responder=responder)
    assert (result.action, result.response) == (Action.ANSWERED, "local answer")
    assert responder.calls == [IN_SCOPE]
    assert result.metadata["speculation"] == {"outcome": "released"}


def test_documents_given_as_a_generator_are_read_once(server: str) -> None:
    responder = _responder("local answer")
    with GuardClient(server, speculative=True) as client:
        result = client.answer(IN_SCOPE, (d for d in [PARIS]), responder=responder)
    assert (result.action, result.response) == (Action.ANSWERED, "local answer")
    assert [d.text for d in result.documents] == [PARIS]


async def test_the_async_client_reads_a_generator_of_documents_once(server: str) -> None:
    responder = _responder("local answer")
    async with AsyncGuardClient(server, speculative=True) as client:
        result = await client.answer(IN_SCOPE, (d for d in [PARIS]), responder=responder)
    assert (result.action, result.response) == (Action.ANSWERED, "local answer")


def test_out_of_scope_drops_the_local_answer(server: str) -> None:
    responder = _responder(SECRET)
    with GuardClient(server) as client:
        result = client.answer(OUT_OF_SCOPE, [PARIS], responder=responder, speculative=True)
    assert result.action is Action.REFUSED and SECRET not in result.model_dump_json()
    assert result.metadata["speculation"]["outcome"] == "discarded"


def test_an_unreachable_server_fails_closed_without_the_local_answer() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    responder = _responder(SECRET)
    with GuardClient(f"http://127.0.0.1:{port}", timeout=5, speculative=True) as client:
        result = client.answer(IN_SCOPE, [PARIS], responder=responder)
    assert result.failed_closed and SECRET not in result.model_dump_json()
    assert result.metadata["speculation"]["outcome"] == "discarded"


async def test_async_client_holds_and_drops_alike(server: str) -> None:
    async with AsyncGuardClient(server, speculative=True) as client:
        inside = await client.answer(IN_SCOPE, [PARIS], responder=_responder("local answer"))
        outside = await client.answer(OUT_OF_SCOPE, [PARIS], responder=_responder(SECRET))
    assert inside.response == "local answer" and inside.metadata["speculation"] == {"outcome": "released"}
    assert SECRET not in outside.model_dump_json()
    assert outside.metadata["speculation"]["outcome"] == "discarded"
