"""The system under evaluation: how a RAG system answers a question from its documents.

Two kinds of answerer, behind one small protocol (:class:`Answerer`):

* :class:`PromptAnswerer`: any LLM (a :class:`~scopeguard.llm.base.ChatModel` or a spec string)
  with one of the ELOQ RAG prompts, looked up by name in :data:`RAG_PROMPTS`
  (``basic`` = appendix B.6, ``two-shot`` = B.7, ``zero-shot-cot`` = B.8);
* :class:`PipelineAnswerer`: the user's own pipeline, one of

  - a callable ``(question, documents) -> str``;
  - a LangChain Runnable (duck-typed: has ``.invoke``), called with
    ``{"question": ..., "context": ...}``;
  - a LlamaIndex query engine (duck-typed: has ``.query``), called with the question (it retrieves
    its own documents).

  Replies are coerced to text: a string, an object with a string ``.content`` (chat messages) or
  ``.response`` (LlamaIndex), or a mapping with ``answer``/``output``/``result``/``text``.

Neither LangChain nor LlamaIndex is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from scopeguard.errors import ConfigurationError, LLMResponseError
from scopeguard.llm.base import ChatModel
from scopeguard.prompts import render, render_documents
from scopeguard.types import Document

__all__ = [
    "RAG_PROMPTS",
    "Answerer",
    "PipelineAnswerer",
    "PromptAnswerer",
    "as_answerer",
    "available_rag_prompts",
]

RAG_PROMPTS: dict[str, str] = {
    "basic": "rag_basic",
    "two-shot": "rag_two_shot",
    "zero-shot-cot": "rag_zero_shot_cot",
}
"""RAG prompt name -> template name (ELOQ appendix B.6, B.7, B.8)."""

logger = logging.getLogger(__name__)

_REPLY_KEYS = ("answer", "output", "result", "text", "response")


def available_rag_prompts() -> list[str]:
    return list(RAG_PROMPTS)


@runtime_checkable
class Answerer(Protocol):
    """Answers a question from documents. ``name`` keys stored results (one per prompt)."""

    @property
    def name(self) -> str: ...

    def answer(self, question: str, documents: Sequence[Document]) -> str: ...


class PromptAnswerer:
    """An LLM answering with a named RAG prompt (greedy by default, as a deployed RAG would).

    ``max_tokens`` caps each response (``None``: no cap, the paper's setting: a cap can cut
    Zero-shot-CoT's reasoning before its answer). Responses that stopped at the cap are counted
    in ``truncated`` and logged as a warning.
    """

    def __init__(
        self,
        llm: str | ChatModel,
        prompt: str = "basic",
        *,
        temperature: float = 0.0,
        max_tokens: int | None = 256,
    ) -> None:
        if prompt not in RAG_PROMPTS:
            raise ConfigurationError(
                f"unknown RAG prompt {prompt!r}; valid prompts: {', '.join(available_rag_prompts())}"
            )
        from scopeguard.llm.registry import from_spec

        self.llm: ChatModel = from_spec(llm)
        self.prompt = prompt
        self.template = RAG_PROMPTS[prompt]
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.truncated = 0

    @property
    def name(self) -> str:
        return self.prompt

    def build_prompt(self, question: str, documents: Sequence[Document]) -> str:
        return render(self.template, document=render_documents(documents), question=question)

    def answer(self, question: str, documents: Sequence[Document]) -> str:
        completion = self.llm.complete(
            self.build_prompt(question, documents), temperature=self.temperature, max_tokens=self.max_tokens
        )
        if completion.finish_reasons[:1] == ("length",):
            self.truncated += 1
            logger.warning(
                "the %s response to %r stopped at the %s-token cap (max_tokens=None lifts it)",
                self.prompt,
                question[:80],
                self.max_tokens,
            )
        return completion.text.strip()


def _reply_text(reply: Any) -> str:
    """Coerce what a user pipeline returned to the response text."""
    if isinstance(reply, str):
        return reply.strip()
    for attr in ("content", "response"):
        value = getattr(reply, attr, None)
        if isinstance(value, str):
            return value.strip()
    if isinstance(reply, Mapping):
        for key in _REPLY_KEYS:
            if isinstance(reply.get(key), str):
                return str(reply[key]).strip()
    raise LLMResponseError(
        f"the pipeline returned a {type(reply).__name__}, which is not text: return a str, an object "
        f"with a str .content or .response, or a dict with one of the keys {', '.join(_REPLY_KEYS)}",
        reply=repr(reply)[:200],
    )


class PipelineAnswerer:
    """Wraps the user's own RAG pipeline (callable, LangChain Runnable or LlamaIndex query engine)."""

    def __init__(self, pipeline: Any, *, name: str = "pipeline") -> None:
        if hasattr(pipeline, "invoke"):
            self._call: Callable[[str, Sequence[Document]], Any] = lambda q, docs: pipeline.invoke(
                {"question": q, "context": render_documents(docs)}
            )
            kind = "runnable"
        elif hasattr(pipeline, "query"):
            self._call = lambda q, docs: pipeline.query(q)
            kind = "query engine"
        elif callable(pipeline):
            self._call = lambda q, docs: pipeline(q, list(docs))
            kind = "callable"
        else:
            raise ConfigurationError(
                f"cannot evaluate a {type(pipeline).__name__}: pass a callable (question, documents) -> str, "
                "a LangChain Runnable (.invoke) or a LlamaIndex query engine (.query)"
            )
        self.kind = kind
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def answer(self, question: str, documents: Sequence[Document]) -> str:
        return _reply_text(self._call(question, documents))


def as_answerer(target: Any, *, prompt: str = "basic", max_tokens: int | None = 256) -> Answerer:
    """An :class:`Answerer` for an LLM spec/ChatModel (with ``prompt``), an answerer, or a pipeline."""
    if isinstance(target, (str, ChatModel)):
        return PromptAnswerer(target, prompt, max_tokens=max_tokens)
    if isinstance(target, Answerer):
        return target
    return PipelineAnswerer(target)
