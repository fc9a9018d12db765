"""Lazy imports of optional extras with an error that names the ``pip install`` line."""

from __future__ import annotations

import importlib
from types import ModuleType

from scopeguard.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, *, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``scopeguard[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(package or module.split(".")[0], extra, feature) from None
