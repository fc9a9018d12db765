"""``ScopeGuardLLM``: any scopeguard :class:`~scopeguard.ChatModel` as a LlamaIndex LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, field_validator
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

from scopeguard import ChatModel, Completion, StreamingChatModel, from_spec
from scopeguard.llm.base import ChatMessage as SGMessage
from scopeguard.llm.base import Prompt

__all__ = ["ScopeGuardLLM"]


def _to_messages(messages: Sequence[ChatMessage]) -> list[SGMessage]:
    return [SGMessage(role=str(m.role.value), content=m.content or "") for m in messages]


class ScopeGuardLLM(CustomLLM):
    """Wraps a scopeguard chat model (``"local"``, ``"openai:gpt-4o-mini"``, a fake...) for LlamaIndex.

    Chat keeps the roles; ``stream_chat``/``stream_complete`` (and their async twins) yield the
    reply token by token when the model streams (:class:`scopeguard.StreamingChatModel`:
    ``local``, ``openai:...``), else in one chunk; async calls use the backend's ``acomplete``
    and ``astream``.

    >>> llm = ScopeGuardLLM(chat_model="local", max_tokens=128)
    """

    chat_model: ChatModel = Field(description="a scopeguard ChatModel, or a spec string such as 'local'")
    temperature: float = 0.0
    max_tokens: int | None = None
    context_window: int = 4096
    num_output: int = 256

    @field_validator("chat_model", mode="before")
    @classmethod
    def _from_spec(cls, value: Any) -> ChatModel:
        return from_spec(value) if isinstance(value, str) else value

    @classmethod
    def class_name(cls) -> str:
        return "ScopeGuardLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window,
            num_output=self.max_tokens or self.num_output,
            is_chat_model=True,
            model_name=self.chat_model.name,
        )

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            "temperature": kwargs.get("temperature", self.temperature),
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
        }

    @staticmethod
    def _chat_response(completion: Completion) -> ChatResponse:
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=completion.text),
            raw={"model": completion.model, "finish_reasons": list(completion.finish_reasons)},
        )

    def _chunk(self, text: str, piece: str) -> ChatResponse:
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
            delta=piece,
            raw={"model": self.chat_model.name},
        )

    def _pieces(self, prompt: Prompt, kwargs: dict[str, Any]) -> Iterator[str]:
        """The reply token by token from a streaming model, else in one piece."""
        if not isinstance(self.chat_model, StreamingChatModel):
            yield self.chat_model.complete(prompt, **self._options(kwargs)).text
            return
        yield from self.chat_model.stream(prompt, **self._options(kwargs))  # closed with this one

    async def _apieces(self, prompt: Prompt, kwargs: dict[str, Any]) -> AsyncIterator[str]:
        if not isinstance(self.chat_model, StreamingChatModel):
            yield (await self.chat_model.acomplete(prompt, **self._options(kwargs))).text
            return
        async with aclosing(self.chat_model.astream(prompt, **self._options(kwargs))) as pieces:
            async for piece in pieces:
                yield piece

    # -- completion ---------------------------------------------------------------------------
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.chat_model.complete(prompt, **self._options(kwargs)).text)

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        completion = await self.chat_model.acomplete(prompt, **self._options(kwargs))
        return CompletionResponse(text=completion.text)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = ""
        for piece in self._pieces(prompt, kwargs):
            text += piece
            yield CompletionResponse(text=text, delta=piece)

    @llm_completion_callback()
    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseAsyncGen:
        async def gen() -> CompletionResponseAsyncGen:
            text = ""
            async for piece in self._apieces(prompt, kwargs):
                text += piece
                yield CompletionResponse(text=text, delta=piece)

        return gen()

    # -- chat ---------------------------------------------------------------------------------
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._chat_response(self.chat_model.complete(_to_messages(messages), **self._options(kwargs)))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        completion = await self.chat_model.acomplete(_to_messages(messages), **self._options(kwargs))
        return self._chat_response(completion)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        text = ""
        for piece in self._pieces(_to_messages(messages), kwargs):
            text += piece
            yield self._chunk(text, piece)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        async def gen() -> ChatResponseAsyncGen:
            text = ""
            async for piece in self._apieces(_to_messages(messages), kwargs):
                text += piece
                yield self._chunk(text, piece)

        return gen()
