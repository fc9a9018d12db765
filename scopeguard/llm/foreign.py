"""The base of adapters that put another library's model behind scopeguard's chat protocol.

The LangChain and LlamaIndex adapters (in the integration packages) are :class:`ForeignChatModel`
subclasses: they say how their library's model is called (``_run`` / ``_arun``) and which of its
fields carry ``temperature``, ``max_tokens`` and ``seed``; the base passes per-call options through
a pydantic copy with those fields set (:func:`configured_copy`) and turns a provider's exception
into an :class:`~scopeguard.errors.LLMError` (:func:`provider_error`), so the guard's ``on_error``
applies to it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from scopeguard.errors import LLMConnectionError, LLMError, ScopeGuardError
from scopeguard.llm.base import BaseChatModel, Completion, Prompt, SamplingArgs, complete_keywords

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ForeignChatModel", "configured_copy", "provider_error"]

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


class ForeignChatModel(BaseChatModel, Generic[M]):
    """Another library's model (``foreign``) as a scopeguard chat model. Subclasses set
    :attr:`fields` (option -> the model fields that carry it, first match wins) and implement
    :meth:`_run` and :meth:`_arun` for the configured copy; errors are translated here."""

    fields: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "temperature": ("temperature",),
        "max_tokens": ("max_tokens",),
        "seed": ("seed",),
    }

    def __init__(self, foreign: M, name: str) -> None:
        self.foreign = foreign
        self.model = name

    def _run(self, model: M, prompt: Prompt, n: int) -> Completion:
        raise NotImplementedError

    async def _arun(self, model: M, prompt: Prompt, n: int) -> Completion:
        raise NotImplementedError

    def _configured(self, args: SamplingArgs) -> M:
        return configured_copy(
            self.foreign,
            self.fields,
            temperature=args["temperature"],
            max_tokens=args["max_tokens"],
            seed=args["seed"],
        )

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A provider's exception as an :class:`LLMError` (scopeguard's own pass through)."""
        try:
            yield
        except ScopeGuardError:
            raise
        except Exception as exc:
            raise provider_error(exc, self.model) from exc

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        args = complete_keywords(sampling)
        model = self._configured(args)
        with self._translated():
            return self._run(model, prompt, args["n"])

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        args = complete_keywords(sampling)
        model = self._configured(args)
        with self._translated():
            return await self._arun(model, prompt, args["n"])
