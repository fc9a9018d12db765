"""``ScopeGuardChatModel``: any scopeguard :class:`~scopeguard.ChatModel` as a LangChain chat model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, field_validator

from scopeguard import ChatModel, Completion, from_spec
from scopeguard.llm.base import ChatMessage

__all__ = ["ScopeGuardChatModel"]

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


class ScopeGuardChatModel(BaseChatModel):
    """Wraps a scopeguard chat model (``from_spec("local")``, ``"openai:gpt-4o-mini"``, a fake...)
    so LangChain chains can use it: ``ScopeGuardChatModel(llm="local")``.

    Roles are kept (system/user/assistant); ``stop`` sequences truncate the reply; token usage
    is reported in ``usage_metadata``. Async calls use the backend's ``acomplete``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: ChatModel = Field(description="a scopeguard ChatModel, or a spec string such as 'local'")
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None

    @field_validator("llm", mode="before")
    @classmethod
    def _from_spec(cls, value: Any) -> ChatModel:
        return from_spec(value) if isinstance(value, str) else value

    @property
    def _llm_type(self) -> str:
        return "scopeguard"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.llm.name, "temperature": self.temperature, "max_tokens": self.max_tokens}

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {
            "temperature": kwargs.get("temperature", self.temperature),
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "seed": kwargs.get("seed", self.seed),
        }

    def _result(self, completion: Completion, stop: Sequence[str] | None) -> ChatResult:
        message = AIMessage(
            content=_cut_at_stop(completion.text, stop),
            response_metadata={
                "model_name": completion.model,
                "finish_reason": completion.finish_reasons[0] if completion.finish_reasons else None,
            },
            usage_metadata={
                "input_tokens": completion.prompt_tokens,
                "output_tokens": completion.completion_tokens,
                "total_tokens": completion.prompt_tokens + completion.completion_tokens,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        completion = self.llm.complete(_to_messages(messages), **self._options(kwargs))
        return self._result(completion, stop)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        completion = await self.llm.acomplete(_to_messages(messages), **self._options(kwargs))
        return self._result(completion, stop)
