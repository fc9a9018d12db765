"""LLM backends behind one small chat protocol, selected by spec strings."""

from scopeguard.llm.base import (
    BaseChatModel,
    BaseStreamingChatModel,
    ChatMessage,
    ChatModel,
    Completion,
    Prompt,
    StreamingChatModel,
    StreamUsage,
)
from scopeguard.llm.registry import available_backends, from_spec, register_backend, with_standard_params

__all__ = [
    "BaseChatModel",
    "BaseStreamingChatModel",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "Prompt",
    "StreamUsage",
    "StreamingChatModel",
    "available_backends",
    "from_spec",
    "register_backend",
    "with_standard_params",
]
