"""A reader served by a real llama.cpp server reads like the same GGUF in process (SmolLM2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.detection.read.reader import verdict_messages

pytestmark = [pytest.mark.slow, pytest.mark.integration]

DOCS = (
    "The Brindlewick library opened in March 2019. The building cost 4 million pounds and was "
    "designed by the local firm Harrow & Pike. Its roof carries 300 solar panels.",
    'The Ostrava tram line 7 runs every "twelve" minutes between the station and the zoo; '
    "its cars were built in 1996 and refitted in 2021.",
)
QUESTIONS = (
    (0, "How much did the Brindlewick library cost?"),
    (0, "Who was the first head librarian of Brindlewick?"),
    (1, "How often does tram 7 run?"),
    (1, "What is the fare on tram 7?"),
)


@pytest.fixture(scope="module")
def served_smollm2(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """SmolLM2 behind llama-cpp-python's server on a free port, under its packaged name."""
    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]")
    from scopeguard.llm.llama_server import llama_cpp_server

    log = tmp_path_factory.mktemp("served-reader") / "server.log"
    with llama_cpp_server(smollm2, n_ctx=1024, n_threads=1, alias="smollm2", log=log) as base_url:
        yield base_url


def test_served_and_in_process_reads_give_the_same_prompt_and_scores(served_smollm2: str) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.openai import OpenAIVerdicts
    from scopeguard.llm.openai_compat import OpenAIChatModel

    served = OpenAIVerdicts(OpenAIChatModel("smollm2", base_url=served_smollm2, timeout=300))
    chat = OpenAIVerdicts(OpenAIChatModel("smollm2", base_url=served_smollm2, timeout=300), prompt="chat")
    local = LlamaCppVerdicts("smollm2", n_ctx=1024, n_threads=1, persist_states=False)
    assert served.name == local.name == "smollm2" and served.form == "raw"
    for doc, question in QUESTIONS:
        messages = verdict_messages(question, DOCS[doc])
        a, b = served.score(messages), local.score(messages)
        assert a.n_tokens == b.n_tokens, question  # the server read the very tokens read in process
        assert a.margin == pytest.approx(b.margin, abs=0.05), question
        # llama-cpp-python's server applies the GGUF's own template to chat messages: the same read
        assert chat.score(messages).margin == pytest.approx(a.margin, abs=0.05), question


def test_a_detector_reads_the_served_model_by_spec(
    served_smollm2: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", served_smollm2)
    served = LogProbDetector(reader="openai:smollm2")
    local = LogProbDetector(reader="local:smollm2")
    assert served.identity() == local.identity()  # a profile fitted on one applies to the other
    for doc, question in QUESTIONS[:2]:
        a, b = served.detect(question, DOCS[doc]), local.detect(question, DOCS[doc])
        assert a.label == b.label and a.score == pytest.approx(b.score, abs=0.02), question
