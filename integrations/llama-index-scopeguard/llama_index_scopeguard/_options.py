"""Unknown constructor options are an error, not silently dropped.

The adapters are pydantic models whose LlamaIndex base classes ignore unknown fields, so
``ScopeGuardPostprocessor(..., respond_with_polcy=False)`` would build without a word.
:class:`StrictOptions`, the first base of every public adapter model, raises
:class:`~scopeguard.errors.ConfigurationError` instead, naming the unknown option(s), the closest
valid one and the valid ones. ``class_name``, which LlamaIndex's own serialized form (``to_dict``,
``model_dump``) carries, is let through.
"""

from scopeguard.types import StrictOptions as _Strict

__all__ = ["StrictOptions"]


class StrictOptions(_Strict):
    """scopeguard's :class:`~scopeguard.types.StrictOptions`, letting LlamaIndex's ``class_name`` through."""

    _passed_through = frozenset({"class_name"})
