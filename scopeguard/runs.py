"""Run folders: the one mechanism behind every long, resumable job.

A job (generation, defusion evaluation, retrieval study, answer verification) writes into a folder
that holds its typed configuration (a pydantic model saved as JSON) and append-only JSON Lines
logs of its records::

    folder = RunFolder(out, VerificationConfig)          # config file: config.json
    folder.open(config)                                   # refuses another configuration
    log = folder.log("results.jsonl")                     # a torn last line is cut here
    done = log.keys(lambda row: row["id"])                # what a resumed run skips
    log.append(record)                                    # appended, flushed and fsynced

- :meth:`RunFolder.open` compares the saved configuration with the new one field by field (fields
  in ``free`` may change between runs, for example a growing ``limit``) and raises a
  :class:`~scopeguard.errors.ConfigurationError` naming every differing field with both values;
  ``upgrade`` reads a configuration an earlier version saved as the current one (or refuses it).
- :class:`JsonlLog` appends one record at a time with an fsync, so a kill loses at most the record
  being written; :func:`repair_torn_tail` cuts the half-written last line such a kill leaves.
- Whole files are written atomically with :func:`scopeguard.data.atomic_open` and its helpers.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Collection, Hashable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from scopeguard.data import atomic_write_text
from scopeguard.errors import ConfigurationError, InputError

__all__ = ["JsonlLog", "RunFolder", "append_jsonl", "config_changes", "repair_torn_tail"]

logger = logging.getLogger(__name__)

C = TypeVar("C", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)
K = TypeVar("K", bound=Hashable)


def repair_torn_tail(path: str | os.PathLike[str]) -> int:
    """Cut a half-written last line (left by a kill mid-append) off ``path``; returns the bytes cut."""
    p = Path(path)
    if not p.is_file():
        return 0
    size = p.stat().st_size
    if size == 0:
        return 0
    with p.open("r+b") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        # find the last newline, reading backwards in blocks
        end, keep = size, 0
        while end > 0:
            start = max(0, end - 65536)
            fh.seek(start)
            found = fh.read(end - start).rfind(b"\n")
            if found >= 0:
                keep = start + found + 1
                break
            end = start
        fh.truncate(keep)
    logger.warning("%s: dropped a torn last line (%d bytes) left by an interrupted run", p, size - keep)
    return size - keep


def append_jsonl(path: str | os.PathLike[str], row: BaseModel | dict[str, Any]) -> int:
    """Append one JSON line to ``path`` (flushed and fsynced); returns the line's byte offset."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = row.model_dump_json() if isinstance(row, BaseModel) else json.dumps(row, ensure_ascii=False)
    with p.open("ab") as fh:
        offset = fh.seek(0, os.SEEK_END)
        fh.write((text + "\n").encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())
    return offset


class JsonlLog:
    """An append-only JSON Lines file of records; opening it repairs a torn last line."""

    def __init__(self, path: str | os.PathLike[str], *, repair: bool = True) -> None:
        self.path = Path(path)
        if repair:
            repair_torn_tail(self.path)

    def append(self, row: BaseModel | dict[str, Any]) -> int:
        """Append ``row``; returns its byte offset."""
        return append_jsonl(self.path, row)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Each readable JSON object; an unreadable line is skipped with a warning."""
        if not self.path.is_file():
            return
        with self.path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    obj = None
                if not isinstance(obj, dict):
                    logger.warning("%s:%d: skipping an unreadable record", self.path, lineno)
                    continue
                yield obj

    def records(self, model: type[R]) -> list[R]:
        """The rows validated as ``model``; an invalid row is skipped with a warning."""
        out: list[R] = []
        for row in self.rows():
            try:
                out.append(model.model_validate(row))
            except ValidationError:
                logger.warning("%s: skipping a row that is not a %s", self.path, model.__name__)
        return out

    def keys(self, key: Callable[[dict[str, Any]], K]) -> set[K]:
        """``key(row)`` of every row (the work already done, for a resumed run)."""
        done: set[K] = set()
        for row in self.rows():
            try:
                done.add(key(row))
            except (KeyError, TypeError, ValueError):
                logger.warning("%s: skipping a row without a key", self.path)
        return done


def config_changes(old: dict[str, Any], new: dict[str, Any], *, free: Collection[str] = ()) -> dict[str, Any]:
    """``{field: (old, new)}`` for fields present in both (JSON values) that differ, except ``free``."""
    return {k: (old[k], v) for k, v in new.items() if k in old and k not in free and old[k] != v}


class RunFolder(Generic[C]):
    """A run folder holding a typed configuration (``config_file``) and JSONL logs.

    Args:
        root: the folder (created by :meth:`open`).
        config_type: the pydantic model of the configuration.
        config_file: its file name in the folder.
        free: fields that may differ when the run is resumed (for example ``limit``).
        upgrade: reads a configuration an earlier version saved as this one's (a field renamed,
            or one added later whose default changed what a run computes, set to how the run
            behaved); it raises :class:`~scopeguard.errors.ConfigurationError` for one that cannot
            be resumed.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        config_type: type[C],
        *,
        config_file: str = "config.json",
        free: Collection[str] = (),
        upgrade: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.root = Path(root)
        self.config_type = config_type
        self.config_path = self.root / config_file
        self.free = frozenset(free)
        self.upgrade = upgrade

    def exists(self) -> bool:
        return self.config_path.is_file()

    def _saved(self) -> dict[str, Any]:
        try:
            saved = json.loads(self.config_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"{self.config_path}: unreadable run configuration ({exc})") from None
        if not isinstance(saved, dict):
            raise InputError(f"{self.config_path}: a run configuration must be a JSON object")
        if self.upgrade is None:
            return saved
        try:
            return self.upgrade(saved)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{self.root}: {exc}") from None

    def read_config(self) -> C:
        """The saved configuration (an :class:`InputError` when there is none or it is invalid)."""
        if not self.exists():
            raise InputError(f"{self.root} is not a run folder (no {self.config_path.name})")
        try:
            return self.config_type.model_validate(self._saved())
        except ValidationError as exc:
            raise InputError(
                f"{self.config_path}: not a valid run configuration ({exc.error_count()} errors)"
            ) from None

    def check(self, config: C) -> None:
        """Refuse ``config`` when the folder holds a run with another configuration."""
        if not self.exists():
            return
        changes = config_changes(self._saved(), config.model_dump(mode="json"), free=self.free)
        if changes:
            listed = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changes.items())
            raise ConfigurationError(
                f"{self.root} holds a run with another configuration ({listed}); "
                "resume with the same settings or use a new output folder"
            )

    def open(self, config: C, *, merge: Callable[[C, C], C] | None = None) -> C:
        """Check ``config`` against a saved one (see :meth:`check`), then save it (``merge(saved,
        config)`` when given and the folder held a run) atomically; returns what was saved."""
        self.check(config)
        if merge is not None and self.exists():
            config = merge(self.read_config(), config)
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.config_path, config.model_dump_json(indent=2) + "\n")
        return config

    def log(self, name: str) -> JsonlLog:
        """The JSONL log ``name`` in this folder (a torn last line is repaired)."""
        return JsonlLog(self.root / name)
