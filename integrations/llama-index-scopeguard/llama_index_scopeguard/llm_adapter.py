"""``from_llama_index``: a LlamaIndex LLM as a scopeguard :class:`~scopeguard.ChatModel`.

The other direction from :class:`~llama_index_scopeguard.ScopeGuardLLM`. You rarely call it
yourself: ``Guard(llm=OpenAI(...))`` (and every other ``llm=`` of scopeguard) goes through
``scopeguard.from_spec``, which recognises a LlamaIndex LLM and wraps it with this adapter.

- A chat model gets ``chat`` (roles kept); a completion model gets ``complete`` for a plain
  prompt (as LlamaIndex's ``metadata.is_chat_model`` says).
- ``n`` samples are ``n`` requests (concurrent with ``acomplete``).
- ``temperature``, ``max_tokens`` and ``seed`` reach the LLM where its class declares the field
  (``max_tokens`` also as ``max_new_tokens``): the call uses a copy of the LLM with those fields
  set, so the integration maps them to its API. An LLM without such a field is called as configured.
- Provider exceptions become :class:`scopeguard.LLMError` (:class:`scopeguard.LLMConnectionError`
  for connection and timeout errors), so the guard's ``on_error`` applies to them.
"""

from __future__ import annotations

import asyncio

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse, MessageRole
from llama_index.core.llms import LLM

from scopeguard import ChatModel, Completion, ConfigurationError
from scopeguard.llm.base import Prompt, to_messages
from scopeguard.llm.foreign import ForeignChatModel

__all__ = ["LlamaIndexLLM", "from_llama_index"]

_ROLES = {r.value: r for r in MessageRole}
# scopeguard option -> the LLM fields that carry it, first match wins
_FIELDS = {
    "temperature": ("temperature",),
    "max_tokens": ("max_tokens", "max_new_tokens"),
    "seed": ("seed",),
}


def _to_llama_index(prompt: Prompt) -> list[ChatMessage]:
    return [
        ChatMessage(role=_ROLES.get(m.role, MessageRole.USER), content=m.content) for m in to_messages(prompt)
    ]


def _usage(response: ChatResponse | CompletionResponse) -> tuple[int, int]:
    extra = response.additional_kwargs or {}
    return int(extra.get("prompt_tokens", 0) or 0), int(extra.get("completion_tokens", 0) or 0)


class LlamaIndexLLM(ForeignChatModel[LLM]):
    """A LlamaIndex LLM behind scopeguard's chat protocol; see the module docstring."""

    fields = _FIELDS

    def __init__(self, llm: LLM) -> None:
        super().__init__(llm, f"llama_index:{llm.metadata.model_name}")

    @property
    def llama_index_llm(self) -> LLM:
        return self.foreign

    def _call(self, llm: LLM, prompt: Prompt) -> tuple[str, int, int]:
        if isinstance(prompt, str) and not llm.metadata.is_chat_model:
            completion = llm.complete(prompt)
            return (completion.text, *_usage(completion))
        chat = llm.chat(_to_llama_index(prompt))
        return (chat.message.content or "", *_usage(chat))

    async def _acall(self, llm: LLM, prompt: Prompt) -> tuple[str, int, int]:
        if isinstance(prompt, str) and not llm.metadata.is_chat_model:
            completion = await llm.acomplete(prompt)
            return (completion.text, *_usage(completion))
        chat = await llm.achat(_to_llama_index(prompt))
        return (chat.message.content or "", *_usage(chat))

    def _completion(self, replies: list[tuple[str, int, int]]) -> Completion:
        return Completion(
            texts=tuple(text for text, _, _ in replies),
            model=self.model,
            prompt_tokens=sum(p for _, p, _ in replies),
            completion_tokens=sum(c for _, _, c in replies),
            requests=len(replies),
        )

    def _run(self, model: LLM, prompt: Prompt, n: int) -> Completion:
        return self._completion([self._call(model, prompt) for _ in range(n)])

    async def _arun(self, model: LLM, prompt: Prompt, n: int) -> Completion:
        replies = await asyncio.gather(*(self._acall(model, prompt) for _ in range(n)))
        return self._completion(list(replies))


def from_llama_index(llm: LLM) -> ChatModel:
    """Wrap a LlamaIndex LLM (``OpenAI(...)``, ``MockLLM()``, a ``CustomLLM``...) as a scopeguard ChatModel.

    A :class:`~llama_index_scopeguard.ScopeGuardLLM` is unwrapped to the scopeguard model inside.
    """
    from llama_index_scopeguard.llm import ScopeGuardLLM

    if isinstance(llm, ScopeGuardLLM):
        return llm.chat_model
    if not isinstance(llm, LLM):
        raise ConfigurationError(f"from_llama_index needs a LlamaIndex LLM, got {type(llm).__name__}")
    return LlamaIndexLLM(llm)
