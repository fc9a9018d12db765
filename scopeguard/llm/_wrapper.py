"""The base of a chat model that wraps another (a reply cache, a concurrency limit): it goes by
the wrapped model's ``name`` and samples ``n`` replies in one request when that model does."""

from __future__ import annotations

from scopeguard.llm.base import ChatModel

__all__ = ["WrappedChatModel"]


class WrappedChatModel:
    """A chat model around ``self.llm`` whose ``name`` and ``supports_n`` are the wrapped model's;
    a subclass sets ``llm`` and gives ``complete`` / ``acomplete``."""

    llm: ChatModel

    @property
    def name(self) -> str:
        return self.llm.name

    @property
    def supports_n(self) -> bool:
        """Whether the wrapped backend samples ``n`` replies in one request (see scopeguard.voting)."""
        return bool(getattr(self.llm, "supports_n", True))
