"""``ScopeGuardChatModel``: any scopeguard :class:`~scopeguard.ChatModel` as a LangChain chat model."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel, LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, Field, SecretStr, model_validator

from scopeguard import ChatModel, Completion, StreamingChatModel
from scopeguard.llm.base import ChatMessage, StreamUsage
from scopeguard.llm.deadline import deadline
from scopeguard.llm.registry import with_standard_params
from scopeguard.types import StrictOptions

__all__ = ["ScopeGuardChatModel", "StreamingChatModel"]  # StreamingChatModel: scopeguard's, re-exported

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}


def _to_messages(messages: Sequence[BaseMessage]) -> list[ChatMessage]:
    return [ChatMessage(role=_ROLES.get(m.type, "user"), content=str(m.text)) for m in messages]


def _cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """Truncate at the first stop sequence (backends are not asked to honour ``stop``)."""
    if stop:
        cuts = [i for s in stop if s and (i := text.find(s)) >= 0]
        if cuts:
            return text[: min(cuts)]
    return text


class _StopCutter:
    """Applies stop sequences to streamed text: holds back a tail that could begin a stop
    sequence split across pieces, and ends the stream at the first stop sequence. Keeps the
    stream's closing :class:`~scopeguard.llm.base.StreamUsage` (``usage``), which has no text."""

    def __init__(self, stop: Sequence[str] | None) -> None:
        self.stop = [s for s in stop or () if s]
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.buffer = ""
        self.stopped = False
        self.usage: StreamUsage | None = None

    def feed(self, piece: str) -> str:
        """The text that can be emitted now (``stopped`` turns true at a stop sequence)."""
        if isinstance(piece, StreamUsage):
            self.usage = piece
            return ""
        self.buffer += piece
        cut = _cut_at_stop(self.buffer, self.stop)
        if len(cut) < len(self.buffer):
            self.stopped, self.buffer = True, ""
            return cut
        ready = len(self.buffer) - self.hold
        out, self.buffer = (self.buffer[:ready], self.buffer[ready:]) if ready > 0 else ("", self.buffer)
        return out

    def flush(self) -> str:
        out, self.buffer = self.buffer, ""
        return out


def _usage_metadata(prompt_tokens: int, completion_tokens: int) -> UsageMetadata:
    # the token details are NotRequired in langchain-core; mypy reads them as required
    return UsageMetadata(  # type: ignore[typeddict-item]
        input_tokens=prompt_tokens,
        output_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )


class ScopeGuardChatModel(StrictOptions, BaseChatModel):
    """Wraps a scopeguard chat model (``from_spec("local")``, ``"openai:gpt-4o-mini"``, a fake...)
    so LangChain chains can use it: ``ScopeGuardChatModel(llm="local")``.

    Roles are kept (system/user/assistant); ``stop`` sequences (the field, or the call's)
    truncate the reply; token usage is reported in ``usage_metadata``. Async calls use the
    backend's ``acomplete``. ``stream``/``astream`` yield the reply token by token when the
    backend can stream (:class:`scopeguard.StreamingChatModel`: ``local``, ``openai:...``), else
    in one chunk; ``streaming=True`` makes ``invoke`` stream too (callbacks see each token).
    Tool calling and structured output are not supported.

    LangChain's standard parameters mean what they mean for any chat model: ``timeout`` bounds
    each call, every retry included (a scopeguard deadline, for every backend); ``max_retries``,
    ``api_key`` and ``model`` configure the model a spec string builds
    (``ScopeGuardChatModel(llm="openai:gpt-4o-mini", max_retries=2, api_key=...)``; the in-process
    ``local`` backend needs no key, as a local OpenAI-compatible server takes any, and has no
    transient failures to retry). A model instance keeps its own configuration: a different
    ``model``, key or retry count than its own is an error naming the setting. Other unknown
    arguments are rejected.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: ChatModel = Field(description="a scopeguard ChatModel, or a spec string such as 'local'")
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    stop: list[str] | None = None
    streaming: bool = False
    timeout: float | None = Field(default=None, gt=0, description="seconds for one call, retries included")
    max_retries: int | None = Field(default=None, ge=0, description="retries of a transient failure")
    api_key: SecretStr | None = Field(default=None, description="the key of the model a spec builds")
    model: str | None = Field(default=None, description="the model name a spec string builds")

    @model_validator(mode="before")
    @classmethod
    def _build_llm(cls, values: Any) -> Any:
        """A spec string becomes a model built with the standard parameters; an instance is
        checked against them."""
        if not isinstance(values, dict) or "llm" not in values:
            return values
        key = values.get("api_key")
        secret = key.get_secret_value() if isinstance(key, SecretStr) else key
        llm = with_standard_params(
            values["llm"], model=values.get("model"), max_retries=values.get("max_retries"), api_key=secret
        )
        return {**values, "llm": llm}

    @property
    def _llm_type(self) -> str:
        return "scopeguard"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": self.llm.name,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "stop": self.stop,
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider="scopeguard",
            ls_model_name=kwargs.get("model") or self.llm.name,
            ls_model_type="chat",
            ls_temperature=kwargs.get("temperature", self.temperature),
        )
        if (max_tokens := kwargs.get("max_tokens", self.max_tokens)) is not None:
            params["ls_max_tokens"] = max_tokens
        if stop := stop or self.stop:
            params["ls_stop"] = stop
        return params

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            "temperature": kwargs.get("temperature", self.temperature),
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "seed": kwargs.get("seed", self.seed),
        }

    def _stop(self, stop: list[str] | None) -> list[str] | None:
        return stop if stop is not None else self.stop

    @staticmethod
    def _usage(completion: Completion) -> UsageMetadata:
        return _usage_metadata(completion.prompt_tokens, completion.completion_tokens)

    @staticmethod
    def _response_metadata(completion: Completion) -> dict[str, Any]:
        return {
            "model_name": completion.model,
            "finish_reason": completion.finish_reasons[0] if completion.finish_reasons else None,
        }

    def _result(self, completion: Completion, stop: Sequence[str] | None) -> ChatResult:
        message = AIMessage(
            content=_cut_at_stop(completion.text, stop),
            response_metadata=self._response_metadata(completion),
            usage_metadata=self._usage(completion),
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _one_chunk(self, completion: Completion, stop: Sequence[str] | None) -> ChatGenerationChunk:
        message = AIMessageChunk(
            content=_cut_at_stop(completion.text, stop),
            response_metadata=self._response_metadata(completion),
            usage_metadata=self._usage(completion),
            chunk_position="last",
        )
        return ChatGenerationChunk(message=message)

    def _last_chunk(self, text: str, stopped: bool, usage: StreamUsage | None) -> ChatGenerationChunk:
        """The closing chunk: the held-back text, the finish reason and, where the backend
        reported it (a :class:`~scopeguard.llm.base.StreamUsage` piece), the token usage."""
        reason = "stop" if stopped else (usage.finish_reason if usage is not None else None) or None
        metadata = {"model_name": self.llm.name, "finish_reason": reason}
        message = AIMessageChunk(content=text, response_metadata=metadata, chunk_position="last")
        if usage is not None:
            message.usage_metadata = _usage_metadata(usage.prompt_tokens, usage.completion_tokens)
        return ChatGenerationChunk(message=message)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with deadline(self.timeout):
            completion = self.llm.complete(_to_messages(messages), **self._options(kwargs))
            return self._result(completion, self._stop(stop))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with deadline(self.timeout):
            completion = await self.llm.acomplete(_to_messages(messages), **self._options(kwargs))
            return self._result(completion, self._stop(stop))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        with deadline(self.timeout):
            prompt, options = _to_messages(messages), self._options(kwargs)
            if not isinstance(self.llm, StreamingChatModel):
                chunk = self._one_chunk(self.llm.complete(prompt, **options), self._stop(stop))
                if run_manager:
                    run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk
                return
            cutter = _StopCutter(self._stop(stop))
            pieces = self.llm.stream(prompt, **options)
            try:
                for piece in pieces:
                    if text := cutter.feed(piece):
                        chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
                        if run_manager:
                            run_manager.on_llm_new_token(text, chunk=chunk)
                        yield chunk
                    if cutter.stopped:
                        break
            finally:
                close = getattr(pieces, "close", None)
                if close is not None:
                    close()
            yield self._last_chunk(cutter.flush(), cutter.stopped, cutter.usage)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        with deadline(self.timeout):
            prompt, options = _to_messages(messages), self._options(kwargs)
            if not isinstance(self.llm, StreamingChatModel):
                completion = await self.llm.acomplete(prompt, **options)
                chunk = self._one_chunk(completion, self._stop(stop))
                if run_manager:
                    await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk
                return
            cutter = _StopCutter(self._stop(stop))
            async with aclosing(
                cast("AsyncGenerator[str, None]", self.llm.astream(prompt, **options))
            ) as pieces:
                async for piece in pieces:
                    if text := cutter.feed(piece):
                        chunk = ChatGenerationChunk(message=AIMessageChunk(content=text))
                        if run_manager:
                            await run_manager.on_llm_new_token(text, chunk=chunk)
                        yield chunk
                    if cutter.stopped:
                        break
            yield self._last_chunk(cutter.flush(), cutter.stopped, cutter.usage)
