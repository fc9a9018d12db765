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

__all__ = ["available_backends", "from_spec", "register_backend", "with_standard_params"]

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


def _with_model(spec: str, model: str) -> str:
    """``spec`` naming ``model``: ``openai:gpt-4o-mini?timeout=5`` -> ``openai:MODEL?timeout=5``."""
    prefix, _, rest = spec.partition(":")
    _, sep, query = rest.partition("?")
    return f"{prefix}:{model}{sep}{query}"


def with_standard_params(
    llm: str | ChatModel,
    *,
    model: str | None = None,
    max_retries: int | None = None,
    api_key: str | None = None,
) -> ChatModel:
    """``llm`` with the parameters every framework's chat model takes (LangChain's, LlamaIndex's).

    A spec string is built with them: ``model`` replaces the spec's model name, ``max_retries``
    and ``api_key`` go to the backend's factory (``openai``: ``max_attempts=max_retries+1`` and the
    key; ``local`` needs neither). A model instance keeps its own configuration: a ``model``, key
    or retry count other than its own raises :class:`ConfigurationError` naming each.
    (``timeout`` is the caller's: a :func:`scopeguard.llm.deadline.deadline` around each call.)
    """
    if isinstance(llm, str):
        options = {k: v for k, v in (("max_retries", max_retries), ("api_key", api_key)) if v is not None}
        return from_spec(_with_model(llm, model) if model else llm, **options)
    name = getattr(llm, "name", None)
    attempts = getattr(llm, "max_attempts", None)
    own_key = getattr(llm, "api_key", None)  # a remote model's key
    refused = []
    if api_key is not None and own_key not in (None, api_key):
        refused.append("api_key (it has a key of its own)")
    if model is not None and model != name:
        refused.append(f"model={model!r} (it is {name!r})")
    if max_retries is not None and attempts is not None and attempts != max_retries + 1:
        refused.append(f"max_retries={max_retries} (it makes {attempts} attempts)")
    if refused:
        raise ConfigurationError(
            f"{', '.join(refused)}: a model instance keeps its own configuration; set it on the "
            f"{type(llm).__name__} you pass, or pass a spec string such as 'openai:gpt-4o-mini'"
        )
    return llm
