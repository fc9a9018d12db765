"""Spec strings select an LLM backend everywhere (CLI and Python).

``from_spec("local")``, ``from_spec("local:/path/model.gguf")``, ``from_spec("openai:gpt-4o-mini")``.
The part before the first ``:`` names a backend in the registry; the rest is passed to the
backend's factory. Backends register lazily (``"module:attribute"``) so nothing heavy is
imported until used.

``from_spec`` also accepts a model object: a scopeguard :class:`~scopeguard.llm.base.ChatModel`
is returned as is; a LangChain chat model or a LlamaIndex LLM is wrapped by the adapter of its
integration package (``langchain_scopeguard.from_langchain``,
``llama_index_scopeguard.from_llama_index``), recognised by the module of its base class, so
neither framework is imported here. Anything else is a :class:`ConfigurationError`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from scopeguard.errors import ConfigurationError, MissingDependencyError
from scopeguard.llm.base import ChatModel

__all__ = ["available_backends", "from_spec", "register_backend"]

Factory = Callable[..., ChatModel]

_BACKENDS: dict[str, str | Factory] = {
    "openai": "scopeguard.llm.openai_compat:from_spec_arg",
    "local": "scopeguard.llm.local:from_spec_arg",
}


# Foreign model objects: (base-class module prefixes, adapter "module:function", pip package, what).
_ADAPTERS: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
    (
        ("langchain_core.language_models.",),
        "langchain_scopeguard:from_langchain",
        "langchain-scopeguard",
        "a LangChain chat model",
    ),
    (
        ("llama_index.core.base.llms.", "llama_index.core.llms."),
        "llama_index_scopeguard:from_llama_index",
        "llama-index-scopeguard",
        "a LlamaIndex LLM",
    ),
)
_ACCEPTED = (
    "a spec string ('local', 'local:/path/model.gguf', 'openai:gpt-4o-mini', ...), a scopeguard "
    "ChatModel, a LangChain chat model (with langchain-scopeguard) or a LlamaIndex LLM (with "
    "llama-index-scopeguard)"
)


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


def _adapt(model: object) -> ChatModel | None:
    """Wrap a LangChain / LlamaIndex model with its integration's adapter (``None``: not one)."""
    modules = [getattr(cls, "__module__", "") for cls in type(model).__mro__]
    for prefixes, adapter, package, what in _ADAPTERS:
        if not any(m.startswith(prefixes) for m in modules):
            continue
        module, _, attr = adapter.partition(":")
        try:
            wrap = getattr(importlib.import_module(module), attr)
        except ImportError:
            # The adapter is a package of its own, not a scopeguard extra: replace the message,
            # which would name `pip install 'scopeguard[...]'`.
            error = MissingDependencyError(package, package, f"Using {what} ({type(model).__name__})")
            error.args = (
                f"Using {what} ({type(model).__name__}) as a scopeguard LLM needs the '{package}' "
                f"adapter package, which is not installed. Install it with: pip install {package} "
                f"(from a source checkout: pip install ./integrations/{package})",
            )
            raise error from None
        return wrap(model)  # type: ignore[no-any-return]
    return None


def from_spec(spec: str | ChatModel | Any, **kwargs: Any) -> ChatModel:
    """Build a chat model from a spec string, or accept a model object (see the module docstring).

    Raises :class:`ConfigurationError` for an unknown spec or an object that is not a model, and
    :class:`MissingDependencyError` for a LangChain/LlamaIndex model whose adapter is not installed.
    """
    if not isinstance(spec, str):
        adapted = _adapt(spec)
        if adapted is not None:
            return adapted
        if isinstance(spec, ChatModel):
            return spec
        raise ConfigurationError(f"cannot use {type(spec).__name__!r} as an LLM: pass {_ACCEPTED}")
    prefix, _, arg = spec.strip().partition(":")
    if prefix not in _BACKENDS:
        raise ConfigurationError(
            f"unknown LLM spec {spec!r}: the backend {prefix!r} is not registered; "
            f"valid prefixes: {', '.join(available_backends())} "
            "(for example 'local', 'local:/path/model.gguf' or 'openai:gpt-4o-mini')"
        )
    return _resolve(_BACKENDS[prefix])(arg, **kwargs)
