"""A chat model whose replies are held to a JSON schema, where the backend can do it.

``with_json_schema(llm, schema)`` wraps any :class:`~scopeguard.llm.base.ChatModel`. A backend
that declares ``supports_json_schema`` (the embedded llama.cpp one: a grammar built from the
schema) gets the schema on every call, so even a 135M-parameter model replies with JSON that
parses. Any other backend is called as it is: the prompt asks for JSON, and the caller's parser
decides. The wrapper's ``name`` carries a hash of the schema, so a reply cache keyed on the model
name never serves a constrained reply to an unconstrained request or the other way round.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scopeguard.llm.base import BaseChatModel, ChatModel, Completion, Prompt, SamplingArgs, complete_keywords

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["JsonSchemaChatModel", "with_json_schema"]


class JsonSchemaChatModel(BaseChatModel):
    """``llm`` with every reply constrained to ``schema`` (when ``llm`` supports it)."""

    def __init__(self, llm: ChatModel, schema: Mapping[str, Any]) -> None:
        self.llm = llm
        self.schema = dict(schema)
        digest = hashlib.sha256(json.dumps(self.schema, sort_keys=True).encode("utf-8")).hexdigest()
        self.model = f"{llm.name}+json-{digest[:10]}"
        self.constrained = bool(getattr(llm, "supports_json_schema", False))
        self.supports_n = bool(getattr(llm, "supports_n", True))

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        extra: dict[str, Any] = {"json_schema": self.schema} if self.constrained else {}
        return self.llm.complete(prompt, **complete_keywords(sampling), **extra)

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        if self.constrained:  # the backend's complete() in a thread: BaseChatModel's acomplete
            return await super().acomplete(prompt, **complete_keywords(sampling))
        return await self.llm.acomplete(prompt, **complete_keywords(sampling))


def with_json_schema(llm: ChatModel, schema: Mapping[str, Any]) -> JsonSchemaChatModel:
    """``llm`` whose replies follow ``schema`` where the backend supports it (see the module doc)."""
    return JsonSchemaChatModel(llm, schema)
