"""The served reader (OpenAIVerdicts) with a scripted endpoint: which request it sends, how it
reads the reply, which name it takes, and that concurrent checks are not serialised."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from pathlib import Path
from typing import Any

import pytest

from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.detection.head.logprob import LogProbHead, default_head_path
from scopeguard.detection.read.openai import OpenAIVerdicts
from scopeguard.detection.read.reader import verdict_messages
from scopeguard.errors import ConfigurationError, LLMResponseError, ModelError

DOC = "The Brindlewick library opened in March 2019. The building cost 4 million pounds."
QUESTION = "How much did the Brindlewick library cost?"


def _text(top: dict[str, float] | None, prompt_tokens: int = 42) -> dict[str, Any]:
    logprobs = None if top is None else {"tokens": ["x"], "top_logprobs": [top]}
    return {"choices": [{"text": "x", "logprobs": logprobs}], "usage": {"prompt_tokens": prompt_tokens}}


def _chat(top: dict[str, float]) -> dict[str, Any]:
    content = [
        {
            "token": "Yes",
            "logprob": top.get("Yes", -9.0),
            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top.items()],
        }
    ]
    return {"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": content}}]}


class ScriptedEndpoint:
    """An OpenAIChatModel's request methods, answering every request with ``reply`` (a dict)."""

    def __init__(self, model: str, reply: dict[str, Any] | None = None, *, together: int = 0) -> None:
        self.model = model
        self.base_url = "http://served.local/v1"
        self.reply = reply if reply is not None else _text({"Yes": -0.2, "No": -1.8, " Yes": -4.0})
        # with ``together``: each request returns only once that many are in flight at once
        self.barrier = threading.Barrier(together, timeout=30) if together else None
        self.in_flight = 0
        self.all_in = asyncio.Event()
        self.together = together
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _answer(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((kind, params))
        if self.barrier is not None:
            self.barrier.wait()
        return self.reply

    def text_completion(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._answer("text", params)

    def chat_completion(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._answer("chat", params)

    async def atext_completion(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("atext", params))
        if self.together:
            self.in_flight += 1
            if self.in_flight == self.together:
                self.all_in.set()
            await self.all_in.wait()
        return self.reply

    async def achat_completion(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("achat", params))
        return self.reply


def test_a_model_without_a_gguf_here_is_asked_in_chat_form_under_its_served_name() -> None:
    endpoint = ScriptedEndpoint("gpt-4o-mini", _chat({"Yes": -0.2, "No": -1.8}))
    scorer = OpenAIVerdicts(endpoint)
    assert scorer.name == "gpt-4o-mini" and scorer.reads_as is None and scorer.form == "chat"
    score = scorer.score(verdict_messages(QUESTION, DOC))
    kind, params = endpoint.calls[0]
    assert (
        kind == "chat"
        and params["messages"][0]["role"] == "user"
        and QUESTION in params["messages"][0]["content"]
    )
    assert (params["max_tokens"], params["temperature"], params["logprobs"], params["top_logprobs"]) == (
        1,
        0.0,
        True,
        20,
    )
    assert score.margin == pytest.approx(-1.6)
    assert scorer.count_tokens("x" * 40) == 11  # no tokenizer: the estimate


def test_a_served_packaged_model_takes_its_in_process_name_without_its_gguf(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # chat form: the name (and so the head and profiles) follow the served name; no GGUF is opened
    scorer = OpenAIVerdicts(ScriptedEndpoint("qwen2.5-coder-1.5b"), prompt="chat")
    assert scorer.name == "qwen2.5-coder-1.5b" and scorer.reads_as == "qwen2.5-coder-1.5b"
    assert scorer.form == "chat"
    other = OpenAIVerdicts(ScriptedEndpoint("qwen"), reads_as="/models/my-reader.Q4_K_M.gguf", prompt="chat")
    assert other.name == "my-reader.Q4_K_M"


def test_auto_falls_back_to_chat_with_a_warning_when_the_gguf_is_not_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = ScriptedEndpoint("reader", _chat({"No": -0.1, "Yes": -3.0}))
    scorer = OpenAIVerdicts(endpoint, reads_as=tmp_path / "absent.gguf")
    with caplog.at_level(logging.WARNING):
        score = scorer.score(verdict_messages(QUESTION, DOC))
    assert endpoint.calls[0][0] == "chat" and score.margin == pytest.approx(2.9)
    assert "not found" in caplog.text and "/chat/completions" in caplog.text
    strict = OpenAIVerdicts(ScriptedEndpoint("reader"), reads_as=tmp_path / "absent.gguf", prompt="raw")
    with pytest.raises(ModelError, match="not found"):
        strict.score(verdict_messages(QUESTION, DOC))


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="needs the GGUF"):
        OpenAIVerdicts(ScriptedEndpoint("reader"), prompt="raw")
    with pytest.raises(ConfigurationError, match="valid: auto, raw, chat"):
        OpenAIVerdicts(ScriptedEndpoint("reader"), prompt="json")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"1\.\.20"):
        OpenAIVerdicts(ScriptedEndpoint("reader"), top_logprobs=50)
    with pytest.raises(ConfigurationError, match="not the hidden states of layers"):
        OpenAIVerdicts(ScriptedEndpoint("reader"), layers=(-4,))


def test_a_served_packaged_model_is_read_with_the_in_process_prompt_text(smollm2: Path) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    endpoint = ScriptedEndpoint("smollm2")
    scorer = OpenAIVerdicts(endpoint)
    assert scorer.name == "smollm2" and scorer.form == "raw"
    messages = verdict_messages(QUESTION, DOC)
    score = scorer.score(messages)
    kind, params = endpoint.calls[0]
    in_process = LlamaCppVerdicts("smollm2", n_ctx=512, n_threads=1, persist_states=False)
    assert kind == "text" and params["prompt"] == in_process.render(messages)
    assert (params["max_tokens"], params["temperature"], params["logprobs"]) == (1, 0.0, 20)
    assert "messages" not in params and params["model"] == "smollm2"
    yes = math.log(math.exp(-0.2) + math.exp(-4.0))  # the variants' probabilities are summed
    assert score.margin == pytest.approx(-1.8 - yes) and score.n_tokens == 42
    assert scorer.count_tokens(DOC) == in_process.count_tokens(DOC)  # passages cut alike


def test_preread_has_the_engine_read_each_document_up_to_the_question(smollm2: Path) -> None:
    from scopeguard.detection.read.reader import Reader

    endpoint = ScriptedEndpoint("smollm2")
    reader = Reader(OpenAIVerdicts(endpoint))
    assert reader.preread([DOC, "Another document."]) == 2
    prompts = [params["prompt"] for _, params in endpoint.calls]
    assert len(prompts) == 3 and DOC not in prompts[0]  # the instruction, then each document after it
    assert prompts[1].startswith(prompts[0]) and prompts[2].startswith(prompts[0])
    assert (
        DOC in prompts[1] and prompts[1].rstrip().endswith("Question:") and "Another document." in prompts[2]
    )
    reader.read(QUESTION, [DOC])  # looking a pre-read document up sends nothing: one request, the read
    assert len(endpoint.calls) == 4 and QUESTION in endpoint.calls[-1][1]["prompt"]
    chat = Reader(OpenAIVerdicts(ScriptedEndpoint("gpt", _chat({"Yes": -0.1})), prompt="chat"))
    assert chat.preread([DOC]) == 0 and chat.scorer.chat_model.calls == []  # type: ignore[attr-defined]


def test_replies_without_log_probs_or_verdict_words_are_typed_errors() -> None:
    no_logprobs = OpenAIVerdicts(ScriptedEndpoint("gpt", _text(None)), prompt="chat")
    with pytest.raises(ConfigurationError, match=r"no log-probs.*detector='judge'"):
        no_logprobs.score(verdict_messages(QUESTION, DOC))
    no_verdict = OpenAIVerdicts(ScriptedEndpoint("gpt", _text({"The": -0.1, "It": -2.0})), prompt="chat")
    with pytest.raises(LLMResponseError, match="neither Yes nor No"):
        no_verdict.score(verdict_messages(QUESTION, DOC))


def test_the_packaged_head_applies_to_a_served_copy_of_the_packaged_reader() -> None:
    if not default_head_path().is_file():
        pytest.skip("no packaged head")
    packaged = LogProbHead.load(default_head_path())
    served = LogProbDetector(reader=OpenAIVerdicts(ScriptedEndpoint(packaged.model), prompt="chat"))
    assert served.head.model == packaged.model and served.threshold == packaged.threshold
    assert served.identity()["reader"] == packaged.model
    other = LogProbDetector(reader=OpenAIVerdicts(ScriptedEndpoint("qwen"), prompt="chat"))
    assert other.head.model == "qwen" and other.threshold == 0.5  # uncalibrated: calibrate it


def test_checks_from_several_threads_are_in_flight_together() -> None:
    # every request waits until four are in flight at once: a lock around requests would break the barrier
    endpoint = ScriptedEndpoint("gpt", _chat({"Yes": -0.2, "No": -1.8}), together=4)
    detector = LogProbDetector(reader=OpenAIVerdicts(endpoint, prompt="chat"))
    verdicts: list[Any] = []
    threads = [
        threading.Thread(target=lambda: verdicts.append(detector.detect(QUESTION, DOC))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(verdicts) == 4 and len(endpoint.calls) == 4
    assert {v.label for v in verdicts} == {"in_scope"}


async def test_async_scores_are_in_flight_together(smollm2: Path) -> None:
    endpoint = ScriptedEndpoint("smollm2", together=4)
    scorer = OpenAIVerdicts(endpoint)
    scorer.load()
    messages = verdict_messages(QUESTION, DOC)
    scores = await asyncio.wait_for(asyncio.gather(*(scorer.ascore(messages) for _ in range(4))), 30)
    assert [kind for kind, _ in endpoint.calls] == ["atext"] * 4
    assert len({s.margin for s in scores}) == 1
