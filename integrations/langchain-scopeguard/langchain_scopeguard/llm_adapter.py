"""``from_langchain``: a LangChain chat model as a scopeguard :class:`~scopeguard.ChatModel`.

The other direction from :class:`~langchain_scopeguard.ScopeGuardChatModel`. You rarely call it
yourself: ``Guard(llm=ChatOpenAI(...))`` (and every other ``llm=`` of scopeguard) goes through
``scopeguard.from_spec``, which recognises a LangChain model and wraps it with this adapter.

- ``n`` samples are ``n`` requests (``batch`` / ``abatch``); LangChain's ``invoke`` returns one.
- ``temperature``, ``max_tokens`` and ``seed`` reach the model where its class declares the
  field (``max_tokens`` also as ``max_output_tokens``, ``num_predict`` or ``max_new_tokens``): the
  call uses a copy of the model with those fields set, so the provider maps them to its API. A
  model without such a field is called as configured.
- Provider exceptions become :class:`scopeguard.LLMError` (:class:`scopeguard.LLMConnectionError`
  for connection and timeout errors), so the guard's ``on_error`` applies to them.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from scopeguard import ChatModel, Completion, ConfigurationError
from scopeguard.llm.base import Prompt, to_messages
from scopeguard.llm.foreign import ForeignChatModel

__all__ = ["LangChainLLM", "from_langchain"]

_MESSAGE_TYPES: dict[str, type[BaseMessage]] = {"system": SystemMessage, "assistant": AIMessage}
# scopeguard option -> the model fields that carry it, first match wins
_FIELDS = {
    "temperature": ("temperature",),
    "max_tokens": ("max_tokens", "max_output_tokens", "num_predict", "max_new_tokens"),
    "seed": ("seed",),
}


def _to_langchain(prompt: Prompt) -> list[BaseMessage]:
    return [_MESSAGE_TYPES.get(m.role, HumanMessage)(content=m.content) for m in to_messages(prompt)]


def _text(output: Any) -> str:
    if isinstance(output, str):  # a (non-chat) LangChain LLM
        return output
    text = getattr(output, "text", None)
    text = text() if callable(text) else text
    return text if isinstance(text, str) else str(getattr(output, "content", output))


def _model_name(model: BaseLanguageModel[Any]) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


class LangChainLLM(ForeignChatModel[BaseLanguageModel[Any]]):
    """A LangChain chat model (or LLM) behind scopeguard's chat protocol; see the module docstring."""

    fields = _FIELDS

    def __init__(self, model: BaseLanguageModel[Any]) -> None:
        super().__init__(model, f"langchain:{_model_name(model)}")

    @property
    def langchain_model(self) -> BaseLanguageModel[Any]:
        return self.foreign

    def _completion(self, outputs: list[Any]) -> Completion:
        usage = [getattr(o, "usage_metadata", None) or {} for o in outputs]
        metadata = [getattr(o, "response_metadata", None) or {} for o in outputs]
        return Completion(
            texts=tuple(_text(o) for o in outputs),
            model=self.model,
            prompt_tokens=sum(int(u.get("input_tokens", 0)) for u in usage),
            completion_tokens=sum(int(u.get("output_tokens", 0)) for u in usage),
            requests=len(outputs),
            finish_reasons=tuple(str(m.get("finish_reason") or m.get("stop_reason") or "") for m in metadata),
        )

    def _run(self, model: BaseLanguageModel[Any], prompt: Prompt, n: int) -> Completion:
        messages = _to_langchain(prompt)
        return self._completion([model.invoke(messages)] if n == 1 else model.batch([messages] * n))

    async def _arun(self, model: BaseLanguageModel[Any], prompt: Prompt, n: int) -> Completion:
        messages = _to_langchain(prompt)
        outputs = [await model.ainvoke(messages)] if n == 1 else await model.abatch([messages] * n)
        return self._completion(outputs)


def from_langchain(model: BaseLanguageModel[Any]) -> ChatModel:
    """Wrap a LangChain chat model (``ChatOpenAI(...)``, a fake, ...) as a scopeguard ChatModel.

    A :class:`~langchain_scopeguard.ScopeGuardChatModel` is unwrapped to the scopeguard model inside.
    """
    from langchain_scopeguard.chat_model import ScopeGuardChatModel

    if isinstance(model, ScopeGuardChatModel):
        return model.llm
    if not isinstance(model, BaseLanguageModel):
        raise ConfigurationError(f"from_langchain needs a LangChain chat model, got {type(model).__name__}")
    return LangChainLLM(model)
