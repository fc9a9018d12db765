"""Lazy imports of optional extras with an error that names the ``pip install`` line, and the
keyword a transformers release takes for a model's dtype."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from scopeguard.errors import MissingDependencyError

__all__ = ["dtype_option", "require"]


def require(module: str, *, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``scopeguard[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(package or module.split(".")[0], extra, feature) from None


def dtype_option(transformers: ModuleType, dtype: Any) -> dict[str, Any]:
    """``from_pretrained``'s keyword for ``dtype`` in this transformers release: ``dtype`` from 4.56
    on, ``torch_dtype`` before (which 4.45-4.55 take, and would set no dtype from ``dtype``)."""
    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}
