"""The one progress rule: a tqdm bar on stderr when it is a terminal, unless asked otherwise."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress_bar", "show_progress"]

T = TypeVar("T")


def show_progress(enabled: bool | None = None) -> bool:
    """``enabled`` when given, else whether stderr is a terminal."""
    return sys.stderr.isatty() if enabled is None else enabled


def progress_bar(
    items: Iterable[T], *, desc: str, enabled: bool | None = None, total: int | None = None
) -> Iterator[T]:
    """Iterate ``items`` behind a progress bar (see :func:`show_progress`)."""
    if not show_progress(enabled):
        yield from items
        return
    from tqdm.auto import tqdm

    yield from tqdm(items, desc=desc, total=total, file=sys.stderr, leave=False)
