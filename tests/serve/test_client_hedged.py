"""A remote guard's hedged answer left to the caller: the caller's answer gets the caveat line."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("httpx", reason="needs scopeguard[serve]")

import httpx

from scopeguard import Action, Verdict
from scopeguard.client import AsyncGuardClient, GuardClient
from scopeguard.policies import HEDGE_CAVEAT

PARIS = "Paris is the capital of France. The Eiffel Tower stands in Paris."
QUESTION = "What is the capital of France, and how many people live there?"


def _server(action: Action) -> Any:
    """A transport answering ``/v1/answer`` as the server does with ``generate: false``."""
    bodies: list[dict[str, Any]] = []

    def handle(request: Any) -> Any:
        body = json.loads(request.content)
        bodies.append(body)
        verdict = Verdict(label="in_scope", score=0.4, hedge=action is Action.HEDGED, detector="lexical")
        result = {
            "question": body["question"],
            "verdict": verdict.model_dump(mode="json"),
            "action": action.value,
            "response": None,
        }
        return httpx.Response(200, json=result)

    transport = httpx.MockTransport(handle)
    transport.bodies = bodies  # type: ignore[attr-defined]
    return transport


def test_the_callers_hedged_answer_carries_the_caveat() -> None:
    transport = _server(Action.HEDGED)
    client = GuardClient("http://guard", transport=transport)
    result = client.answer(QUESTION, [PARIS], responder=lambda q, docs: "Paris.")
    assert transport.bodies[0]["generate"] is False
    assert (result.action, result.response) == (Action.HEDGED, f"Paris.\n\n{HEDGE_CAVEAT}")
    plain = GuardClient("http://guard", transport=_server(Action.ANSWERED))
    assert plain.answer(QUESTION, [PARIS], responder=lambda q, docs: "Paris.").response == "Paris."


async def test_the_async_client_does_the_same() -> None:
    async with AsyncGuardClient("http://guard", transport=_server(Action.HEDGED)) as client:
        result = await client.answer(QUESTION, [PARIS], responder=lambda q, docs: "Paris.")
    assert (result.action, result.response) == (Action.HEDGED, f"Paris.\n\n{HEDGE_CAVEAT}")
