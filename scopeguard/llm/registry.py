"""Spec strings select an LLM backend everywhere (CLI and Python).

``from_spec("local")``, ``from_spec("local:/path/model.gguf")``, ``from_spec("openai:gpt-4o-mini")``.
The part before the first ``:`` names a backend in the registry; the rest is passed to the
backend's factory. Backends register lazily (``"module:attribute"``) so nothing heavy is
imported until used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatModel

__all__ = ["available_backends", "from_spec", "register_backend"]

Factory = Callable[..., ChatModel]

_BACKENDS: dict[str, str | Factory] = {
    "openai": "scopeguard.llm.openai_compat:from_spec_arg",
    "local": "scopeguard.llm.local:from_spec_arg",
}


def register_backend(prefix: str, factory: str | Factory) -> None:
    """Register ``factory(arg: str, **kwargs) -> ChatModel`` under ``prefix``."""
    if not prefix or ":" in prefix:
        raise ConfigurationError(f"invalid backend prefix {prefix!r}")
    _BACKENDS[prefix] = factory


def available_backends() -> list[str]:
    return sorted(_BACKENDS)


def _resolve(factory: str | Factory) -> Factory:
    if callable(factory):
        return factory
    module, _, attr = factory.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def from_spec(spec: str | ChatModel, **kwargs: Any) -> ChatModel:
    """Build a chat model from a spec string (or return a model passed through)."""
    if not isinstance(spec, str):
        return spec
    prefix, _, arg = spec.strip().partition(":")
    if prefix not in _BACKENDS:
        raise ConfigurationError(
            f"unknown LLM spec {spec!r}: the backend {prefix!r} is not registered; "
            f"valid prefixes: {', '.join(available_backends())} "
            "(for example 'local', 'local:/path/model.gguf' or 'openai:gpt-4o-mini')"
        )
    return _resolve(_BACKENDS[prefix])(arg, **kwargs)
