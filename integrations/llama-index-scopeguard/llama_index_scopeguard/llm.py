"""``ScopeGuardLLM``: any scopeguard :class:`~scopeguard.ChatModel` as a LlamaIndex LLM."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from typing import Any, cast

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
from llama_index.core.bridge.pydantic import Field, SecretStr, model_validator
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

from llama_index_scopeguard._options import StrictOptions
from scopeguard import ChatModel, Completion, StreamingChatModel
from scopeguard.llm.base import ChatMessage as SGMessage
from scopeguard.llm.base import Prompt, StreamUsage
from scopeguard.llm.deadline import deadline
from scopeguard.llm.registry import with_standard_params

__all__ = ["ScopeGuardLLM"]


def _to_messages(messages: Sequence[ChatMessage]) -> list[SGMessage]:
    return [SGMessage(role=str(m.role.value), content=m.content or "") for m in messages]


class ScopeGuardLLM(StrictOptions, CustomLLM):
    """Wraps a scopeguard chat model (``"local"``, ``"openai:gpt-4o-mini"``, a fake...) for LlamaIndex.

    Chat keeps the roles; ``stream_chat``/``stream_complete`` (and their async twins) yield the
    reply token by token when the model streams (:class:`scopeguard.StreamingChatModel`:
    ``local``, ``openai:...``), else in one chunk; async calls use the backend's ``acomplete``
    and ``astream``.

    The standard LLM parameters mean what they mean elsewhere: ``timeout`` bounds each call,
    every retry included (a scopeguard deadline); ``model``, ``max_retries`` and ``api_key``
    configure the model a spec string builds, and must agree with a model instance's own
    (:func:`scopeguard.llm.with_standard_params`).

    >>> llm = ScopeGuardLLM(chat_model="openai:gpt-4o-mini", max_tokens=128, timeout=30, max_retries=2)
    """

    chat_model: ChatModel = Field(description="a scopeguard ChatModel, or a spec string such as 'local'")
    temperature: float = 0.0
    max_tokens: int | None = None
    context_window: int = 4096
    num_output: int = 256
    timeout: float | None = Field(default=None, gt=0, description="seconds for one call, retries included")
    max_retries: int | None = Field(default=None, ge=0, description="retries of a transient failure")
    api_key: SecretStr | None = Field(default=None, description="the key of the model a spec builds")
    model: str | None = Field(default=None, description="the model name a spec string builds")

    @model_validator(mode="before")
    @classmethod
    def _build_chat_model(cls, values: Any) -> Any:
        if not isinstance(values, dict) or "chat_model" not in values:
            return values
        key = values.get("api_key")
        chat_model = with_standard_params(
            values["chat_model"],
            model=values.get("model"),
            max_retries=values.get("max_retries"),
            api_key=key.get_secret_value() if isinstance(key, SecretStr) else key,
        )
        return {**values, "chat_model": chat_model}

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

    def _complete(self, prompt: Prompt, kwargs: dict[str, Any]) -> Completion:
        with deadline(self.timeout):
            return self.chat_model.complete(prompt, **self._options(kwargs))

    async def _acomplete(self, prompt: Prompt, kwargs: dict[str, Any]) -> Completion:
        with deadline(self.timeout):
            return await self.chat_model.acomplete(prompt, **self._options(kwargs))

    def _pieces(self, prompt: Prompt, kwargs: dict[str, Any]) -> Iterator[str]:
        """The reply token by token from a streaming model, else in one piece."""
        if not isinstance(self.chat_model, StreamingChatModel):
            yield self._complete(prompt, kwargs).text
            return
        with deadline(self.timeout):
            pieces = self.chat_model.stream(prompt, **self._options(kwargs))
            try:
                for piece in pieces:
                    if not isinstance(piece, StreamUsage):  # the closing usage piece has no text
                        yield piece
            finally:  # a consumer that stops early releases the model (its lock, its request)
                close = getattr(pieces, "close", None)
                if close is not None:
                    close()

    async def _apieces(self, prompt: Prompt, kwargs: dict[str, Any]) -> AsyncIterator[str]:
        if not isinstance(self.chat_model, StreamingChatModel):
            yield (await self._acomplete(prompt, kwargs)).text
            return
        with deadline(self.timeout):
            stream = self.chat_model.astream(prompt, **self._options(kwargs))
            async with aclosing(cast("AsyncGenerator[str, None]", stream)) as pieces:
                async for piece in pieces:
                    if not isinstance(piece, StreamUsage):
                        yield piece

    # -- completion ---------------------------------------------------------------------------
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._complete(prompt, kwargs).text)

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=(await self._acomplete(prompt, kwargs)).text)

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
        return self._chat_response(self._complete(_to_messages(messages), kwargs))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._chat_response(await self._acomplete(_to_messages(messages), kwargs))

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
