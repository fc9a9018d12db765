"""Servers for the serve tests: real uvicorn on 127.0.0.1 (a free port), a fake upstream LLM."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scopeguard.serve import ServeConfig
from scopeguard.testing import FakeOpenAIServer, ScriptedChatModel, running_guard_server

# each test module skips itself without the extra (a skip here would fail the collection)

PARIS = "Paris is the capital of France. The Eiffel Tower stands in Paris."
IN_SCOPE = "What is the capital of France?"
OUT_OF_SCOPE = "Who won the 1998 football world cup final?"
ANSWER = "Paris is the capital of France."


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible upstream LLM that always answers ``ANSWER``."""
    with FakeOpenAIServer(ScriptedChatModel(lambda prompt: ANSWER)) as server:
        yield server


@pytest.fixture(scope="module")
def lexical_server(upstream: FakeOpenAIServer) -> Iterator[str]:
    """The guard server with the ``lexical`` detector, forwarding to ``upstream``."""
    config = ServeConfig(detector="lexical", port=0, upstream=upstream.base_url, upstream_model="fake-model")
    with running_guard_server(config) as url:
        yield url
