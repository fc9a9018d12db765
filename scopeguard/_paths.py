"""The one cache directory rule: ``$SCOPEGUARD_CACHE`` or ``~/.cache/scopeguard``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir(*parts: str) -> Path:
    """``$SCOPEGUARD_CACHE/<parts...>`` (default root ``~/.cache/scopeguard``); not created here."""
    env = os.environ.get("SCOPEGUARD_CACHE")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "scopeguard"
    return root.joinpath(*parts)
