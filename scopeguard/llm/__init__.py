"""LLM backends behind one small chat protocol, selected by spec strings."""

from scopeguard.llm.base import BaseChatModel, ChatMessage, ChatModel, Completion, Prompt
from scopeguard.llm.registry import available_backends, from_spec, register_backend

__all__ = [
    "BaseChatModel",
    "ChatMessage",
    "ChatModel",
    "Completion",
    "Prompt",
    "available_backends",
    "from_spec",
    "register_backend",
]
