"""Helpers for adapters that put another library's model behind scopeguard's chat protocol.

The LangChain and LlamaIndex adapters (in the integration packages) share these: a provider's
exception becomes a :class:`~scopeguard.errors.LLMError`, and per-call options reach a pydantic
model through a copy with the fields that carry them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from scopeguard.errors import LLMConnectionError, LLMError

__all__ = ["configured_copy", "provider_error"]

M = TypeVar("M")


def provider_error(exc: Exception, name: str) -> LLMError:
    """``exc`` raised by a provider as an :class:`LLMError` (:class:`LLMConnectionError` for
    connection and timeout errors, judged by type or class name), naming the model ``name``."""
    kind = type(exc).__name__
    message = f"{name}: {kind}: {exc}"
    if isinstance(exc, (ConnectionError, TimeoutError)) or "Connection" in kind or "Timeout" in kind:
        return LLMConnectionError(message)
    return LLMError(message)


def configured_copy(model: M, fields: Mapping[str, tuple[str, ...]], **options: Any) -> M:
    """``model``, or a pydantic copy with each non-None option set on the first field that carries
    it (``fields``: option -> candidate field names); options the model has no field for are ignored."""
    declared = type(model).model_fields  # type: ignore[attr-defined]
    update: dict[str, Any] = {}
    for option, value in options.items():
        field = next((f for f in fields[option] if f in declared), None)
        if value is not None and field is not None and getattr(model, field) != value:
            update[field] = value
    return model.model_copy(update=update) if update else model  # type: ignore[attr-defined,no-any-return]
