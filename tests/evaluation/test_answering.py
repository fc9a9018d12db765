"""RAG prompts (ELOQ B.6-B.8) and the user-pipeline adapters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from scopeguard.errors import ConfigurationError, LLMResponseError
from scopeguard.evaluation import PipelineAnswerer, PromptAnswerer, as_answerer, available_rag_prompts
from scopeguard.prompts import render
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document

DOC = Document(id="d1", text="The ferry to Saltholm now leaves every forty minutes instead of every hour.")
QUESTION = "How often does the ferry to Saltholm leave?"


def test_rag_prompt_names_are_the_papers_three() -> None:
    assert available_rag_prompts() == ["basic", "two-shot", "zero-shot-cot"]


@pytest.mark.parametrize("prompt", ["basic", "two-shot", "zero-shot-cot"])
def test_prompt_answerer_renders_its_template_greedily(prompt: str) -> None:
    llm = ScriptedChatModel(["  Every forty minutes.  "])
    answerer = PromptAnswerer(llm, prompt, max_tokens=64)
    assert answerer.name == prompt
    assert answerer.answer(QUESTION, [DOC]) == "Every forty minutes."
    (call,) = llm.calls
    assert call.temperature == 0.0 and call.max_tokens == 64
    assert f'"""{DOC.text}"""' in call.prompt
    assert call.prompt.rstrip().endswith(f"Question:\n{QUESTION}\n\nAnswer:")
    assert call.prompt.startswith("You will be provided with a document delimited by triple quotes.")


def test_two_shot_prompt_has_one_answered_and_one_defused_example_before_the_task() -> None:
    text = render("rag_two_shot", document="DOC-TEXT", question="Q-TEXT")
    example, task = text.split("DOC-TEXT")
    # the worked example comes first: one document, two numbered questions and two numbered answers
    questions, answers = example.split("Answer:")
    assert questions.count("\n1. ") == 1 and questions.count("\n2. ") == 1
    assert answers.count("\n1. ") == 1 and answers.count("\n2. ") == 1
    assert "cannot be answered from the document" in answers.split("\n2. ")[1]
    assert "Q-TEXT" in task and text.endswith("Answer:")


def test_zero_shot_cot_prompt_is_appendix_b8() -> None:
    text = render("rag_zero_shot_cot", document="D", question="Q")
    assert (
        "Read the document and reason step by step to answer the question based on the document. "
        "If the question cannot be answered using the document, "
        "state explicitly that the question cannot be answered."
    ) in text


def test_unknown_prompt_lists_valid_names() -> None:
    with pytest.raises(ConfigurationError, match="basic, two-shot, zero-shot-cot"):
        PromptAnswerer(ScriptedChatModel([]), "three-shot")


class _Message:
    def __init__(self, content: str) -> None:
        self.content = content


class _Runnable:
    """Shaped like a LangChain Runnable: .invoke(dict) -> AIMessage-like."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def invoke(self, value: Any) -> _Message:
        self.inputs.append(value)
        return _Message(" forty minutes ")


class _LlamaResponse:
    def __init__(self, response: str) -> None:
        self.response = response


class _QueryEngine:
    """Shaped like a LlamaIndex query engine: .query(str) -> Response with .response."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def query(self, q: str) -> _LlamaResponse:
        self.queries.append(q)
        return _LlamaResponse("every forty minutes")


def test_callable_pipeline_gets_question_and_documents() -> None:
    seen: list[tuple[str, Sequence[Document]]] = []

    def pipeline(q: str, docs: Sequence[Document]) -> str:
        seen.append((q, docs))
        return {"answer": "Forty minutes."}  # type: ignore[return-value]

    answerer = as_answerer(pipeline)
    assert isinstance(answerer, PipelineAnswerer) and answerer.kind == "callable"
    assert answerer.answer(QUESTION, [DOC]) == "Forty minutes."
    assert seen == [(QUESTION, [DOC])]


def test_runnable_is_invoked_with_question_and_context() -> None:
    runnable = _Runnable()
    answerer = as_answerer(runnable)
    assert answerer.answer(QUESTION, [DOC]) == "forty minutes"
    assert runnable.inputs == [{"question": QUESTION, "context": DOC.text}]


def test_query_engine_is_queried_with_the_question() -> None:
    engine = _QueryEngine()
    answerer = as_answerer(engine)
    assert answerer.answer(QUESTION, [DOC]) == "every forty minutes"
    assert engine.queries == [QUESTION]


def test_non_text_reply_is_a_clear_error() -> None:
    answerer = as_answerer(lambda q, d: 42)
    with pytest.raises(LLMResponseError, match="int, which is not text"):
        answerer.answer(QUESTION, [DOC])


def test_unusable_pipeline_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="LangChain Runnable"):
        as_answerer(object())


def test_spec_or_chat_model_becomes_a_prompt_answerer() -> None:
    answerer = as_answerer(ScriptedChatModel(["x"]), prompt="two-shot")
    assert isinstance(answerer, PromptAnswerer) and answerer.name == "two-shot"
