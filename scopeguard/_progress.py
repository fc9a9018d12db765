"""The one progress rule: a tqdm bar on stderr when it is a terminal, unless asked otherwise."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["progress_bar", "progress_meter", "show_progress"]

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


class _Quiet:
    """What :func:`progress_meter` returns when no bar is shown."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def progress_meter(*, total: int, desc: str, initial: int = 0, enabled: bool | None = None) -> Any:
    """A bar to advance by hand (``update``, ``set_postfix_str`` for a running loss, ``close``),
    for loops that are not one iterable; a silent stand-in when no bar is shown."""
    if not show_progress(enabled):
        return _Quiet()
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, file=sys.stderr, leave=False)
