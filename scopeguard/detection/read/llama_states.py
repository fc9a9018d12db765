"""The llama.cpp read's kept prompt states: recent prompts' states in memory, primed ones on disk.

A :class:`KeptStates` holds the sequence state llama.cpp returns after each recent prompt
(``llama_state_seq_get_data``), keyed by the prompt's token ids, within a memory budget (least
recently used first out), and writes the states of primed prefixes (the instruction, a pre-read
document) to a folder where the next process finds them. :class:`~scopeguard.detection.read.llamacpp.
LlamaCppVerdicts` restores the kept state sharing the longest prefix with a new prompt and decodes
only the rest. A state llama.cpp refuses (another build) is dropped, and its file removed; so is
a file whose bytes no longer match the checksum it was written with (a flipped bit, a cut copy),
which llama.cpp would restore and read wrong verdicts from.

The folder has a disk budget (``disk_limit_bytes``): after each write, the states used least
recently (a state's file is touched when it is loaded) are removed until the folder fits; the one
just written stays. Several processes may share the folder: a file another one removed first is
simply gone.

A state is the model's KV cache over the prompt's tokens, in the context's KV type
(:data:`KV_TYPES`: ``f16``, about 28 KB a token for the 1.5B model, or ``q8_0``, about 15 KB).
A state restores only into a context of its own type (llama.cpp refuses another), so the type is
part of every state's key and file name: ``<model>-<kv type>-<tokens>t-<digest>.state``, which is
also how :func:`saved_states_summary` tells the bytes per token of a folder without loading any.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.data import atomic_write_sealed, unseal
from scopeguard.errors import ConfigurationError

__all__ = [
    "DEFAULT_KV_TYPE",
    "DEFAULT_STATE_DISK_MB",
    "KV_TYPES",
    "STATE_SUFFIX",
    "KeptStateStats",
    "KeptStates",
    "KvType",
    "SavedStatesSummary",
    "common_prefix",
    "evict_states",
    "get_kv_type",
    "prefix_tokens",
    "saved_states_summary",
    "state_disk_budget_mb",
    "states_on_disk",
]

STATE_SUFFIX = ".state"


@dataclass(frozen=True)
class KvType:
    """A KV-cache type a llama.cpp context keeps its prompt states in.

    ``ggml``: the ``llama_cpp.GGML_TYPE_*`` constant given as ``type_k`` and ``type_v``;
    ``flash_attn``: whether the context needs llama.cpp's flash attention (a quantised V cache does)."""

    name: str
    ggml: str
    flash_attn: bool

    def llama_params(self, lib: Any) -> dict[str, Any]:
        """The ``llama_cpp.Llama`` keyword arguments for this type (``lib``: the ``llama_cpp`` module)."""
        ggml = int(getattr(lib, self.ggml))
        return {"type_k": ggml, "type_v": ggml, "flash_attn": self.flash_attn}


#: the KV-cache types a reader can keep its states in, by name
KV_TYPES: dict[str, KvType] = {
    "f16": KvType("f16", "GGML_TYPE_F16", flash_attn=False),
    "q8_0": KvType("q8_0", "GGML_TYPE_Q8_0", flash_attn=True),
}

#: the KV-cache type of the llama.cpp read unless told otherwise (``$SCOPEGUARD_KV_TYPE`` overrides
#: it). q8_0 keeps half the bytes per state, and its verdicts agree with f16 reads' on 198 of 200
#: questions (``benchmarks/state_agreement.py``), but the two that changed side were both ELOQ's (68
#: of 70 there), the shipped threshold was fitted on f16 reads and q8_0 reads a new document 1.10x
#: slower: it becomes the default once the detector benchmarks are measured with it.
DEFAULT_KV_TYPE = "f16"


def get_kv_type(name: str | None) -> KvType:
    """The :class:`KvType` named ``name`` (``None``: ``$SCOPEGUARD_KV_TYPE``, else
    :data:`DEFAULT_KV_TYPE`), or a :class:`~scopeguard.errors.ConfigurationError` listing the valid
    names."""
    if name is None:
        name = os.environ.get("SCOPEGUARD_KV_TYPE") or DEFAULT_KV_TYPE
    found = KV_TYPES.get(name)
    if found is None:
        raise ConfigurationError(f"unknown KV-cache type {name!r}; valid: {', '.join(KV_TYPES)}")
    return found


# <stem>-<kv type>-<tokens>t-<digest>.state; files named before the type joined the name say neither
_KV_NAMES = "|".join(re.escape(k) for k in KV_TYPES)
_STATE_NAME = re.compile(rf"-(?P<kv>{_KV_NAMES})-(?P<tokens>\d+)t-[0-9a-f]{{24}}{re.escape(STATE_SUFFIX)}$")

logger = logging.getLogger(__name__)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prefix_tokens(prefix: Sequence[int], ids: Sequence[int]) -> int:
    """How many of ``ids`` are the tokens of ``prefix`` (a prefix of their text tokenised alone):
    all of them where ``ids`` start with them, else one fewer than they share (the last shared
    token may belong to the text after the prefix)."""
    n = common_prefix(prefix, ids)
    return n if n == len(prefix) else max(1, n - 1)


#: the saved-states folder's default budget (``$SCOPEGUARD_STATE_DISK_MB`` overrides it)
DEFAULT_STATE_DISK_MB = 10240.0


def state_disk_budget_mb(given: float | None) -> float:
    """The saved-states folder's budget in MB: ``given``, else ``$SCOPEGUARD_STATE_DISK_MB``, else
    :data:`DEFAULT_STATE_DISK_MB`."""
    if given is None:
        raw = os.environ.get("SCOPEGUARD_STATE_DISK_MB", "").strip()
        try:
            given = float(raw) if raw else DEFAULT_STATE_DISK_MB
        except ValueError:
            raise ConfigurationError(
                f"SCOPEGUARD_STATE_DISK_MB must be a number of MB, got {raw!r}"
            ) from None
    if not given > 0:
        raise ConfigurationError(f"the saved states' disk budget must be > 0 MB, got {given:g}")
    return given


def states_on_disk(directory: Path) -> tuple[int, int]:
    """How many state files ``directory`` holds and their bytes (0, 0 when it does not exist)."""
    summary = saved_states_summary(directory)
    return summary.files, summary.bytes


@dataclass(frozen=True)
class SavedStatesSummary:
    """A saved-states folder by KV type: files, bytes and the tokens they hold (``kv_types``: type
    -> ``(files, bytes, tokens)``, ``"?"`` for files named without a type and token count)."""

    files: int = 0
    bytes: int = 0
    kv_types: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    def bytes_per_token(self, kv: str) -> float | None:
        """The mean bytes a token of the ``kv`` type's states takes on disk (``None``: none saved)."""
        _, size, tokens = self.kv_types.get(kv, (0, 0, 0))
        return size / tokens if tokens else None


@dataclass(frozen=True)
class KeptStateStats:
    """A reader's kept states (:meth:`LlamaCppVerdicts.state_stats`): its KV type, how many reads
    looked for their document's state and found it, what memory holds, and its folder's files."""

    kv_type: str
    lookups: int
    hits: int
    memory_states: int
    memory_bytes: int
    directory: Path | None
    saved: SavedStatesSummary | None

    @property
    def hit_rate(self) -> float | None:
        """``hits / lookups`` (``None`` before the first lookup)."""
        return self.hits / self.lookups if self.lookups else None


def saved_states_summary(directory: Path) -> SavedStatesSummary:
    """What the state files of ``directory`` hold, by KV type, from their sizes and names."""
    files = total = 0
    by_kv: dict[str, tuple[int, int, int]] = {}
    for path in directory.glob(f"*{STATE_SUFFIX}") if directory.is_dir() else ():
        try:
            size = path.stat().st_size
        except OSError:  # removed meanwhile by another process
            continue
        named = _STATE_NAME.search(path.name)
        kv, tokens = (named["kv"], int(named["tokens"])) if named else ("?", 0)
        n, b, t = by_kv.get(kv, (0, 0, 0))
        by_kv[kv] = (n + 1, b + size, t + tokens)
        files += 1
        total += size
    return SavedStatesSummary(files=files, bytes=total, kv_types=dict(sorted(by_kv.items())))


def evict_states(directory: Path, limit_bytes: int, *, keep: Path | None = None) -> int:
    """Remove the least recently used state files of ``directory`` (oldest modification time
    first; a load touches its file) until the rest fit ``limit_bytes``, never ``keep``; the number
    of files removed."""
    found: list[tuple[float, int, Path]] = []
    for path in directory.glob(f"*{STATE_SUFFIX}") if directory.is_dir() else ():
        try:
            st = path.stat()
        except OSError:
            continue
        found.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in found)
    removed = 0
    for _, size, path in sorted(found):
        if total <= limit_bytes:
            break
        if keep is not None and path == keep:
            continue
        path.unlink(missing_ok=True)
        total -= size
        removed += 1
    if removed:
        logger.info(
            "removed %d saved states from %s to keep it within %d MB", removed, directory, limit_bytes >> 20
        )
    return removed


class KeptStates:
    """States of prompts read by one llama.cpp context (see the module docstring).

    Args:
        lib: the ``llama_cpp`` module (its state functions and version).
        limit_bytes: memory for states (0: none kept).
        directory: where primed states are written and found (``None``: memory only).
        file_key: what besides the tokens makes a state valid: the model file, the llama.cpp version,
            an adapter read on those tokens; ``stem``: the files' name before the KV type.
        disk_limit_bytes: the folder's budget (``None``: no limit).
        kv: the context's KV-cache type (:data:`KV_TYPES`; default :data:`DEFAULT_KV_TYPE`), part of
            each state's key and file name.

    ``lookups`` and ``hits`` count the reads that looked for a kept state of their document and
    those that found one (counted by the reader, :meth:`LlamaCppVerdicts.prime`).
    """

    def __init__(
        self,
        lib: Any,
        *,
        limit_bytes: int,
        directory: Path | None,
        file_key: str,
        stem: str,
        disk_limit_bytes: int | None = None,
        kv: str | None = None,
    ) -> None:
        self._lib = lib
        self.limit_bytes = limit_bytes
        self.directory = directory
        self.disk_limit_bytes = disk_limit_bytes
        self.kv = get_kv_type(kv).name
        self._file_key = f"{file_key}kv:{self.kv}:"
        self._stem = stem
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._files: dict[tuple[int, ...], Path] = {}
        self.bytes = 0
        self.lookups = 0
        self.hits = 0

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: tuple[int, ...]) -> bool:
        return key in self._states

    def file(self, ids: Sequence[int]) -> Path | None:
        """Where the state after ``ids`` is kept across processes (``None``: memory only)."""
        if self.directory is None:
            return None
        digest = hashlib.sha256(self._file_key.encode())
        digest.update(np.asarray(list(ids), dtype=np.int32).tobytes())
        name = f"{self._stem}-{self.kv}-{len(ids)}t-{digest.hexdigest()[:24]}{STATE_SUFFIX}"
        return self.directory / name

    def longest(self, ids: Sequence[int], beyond: int) -> tuple[tuple[int, ...] | None, int]:
        """The kept state sharing the most tokens with ``ids``, if it shares more than ``beyond``."""
        best_key: tuple[int, ...] | None = None
        best = beyond
        for key in self._states:
            n = common_prefix(key, ids)
            if n > best:
                best_key, best = key, n
        return best_key, best

    def restore(self, ctx: Any, key: tuple[int, ...], seq: int = 0) -> bool:
        """Load the kept state ``key`` into sequence ``seq`` of the llama.cpp context ``ctx`` (a
        ``llama_context`` wrapper with ``.ctx``); ``False`` when llama.cpp refuses it (it is then
        forgotten, its file removed, and the context cleared)."""
        data = self._states[key]
        self._states.move_to_end(key)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if self._lib.llama_state_seq_set_data(ctx.ctx, buf, len(data), seq):
            return True
        logger.debug("llama.cpp refused a saved state; reading the prompt afresh")
        self.bytes -= len(self._states.pop(key))
        stale = self._files.pop(key, None)
        if stale is not None:  # not this build's state after all: the next process reads afresh
            stale.unlink(missing_ok=True)
        ctx.kv_cache_clear()
        return False

    def capture(self, ctx: Any, ids: Sequence[int]) -> None:
        """Keep the state of ``ctx`` (a raw ``llama_context`` pointer), which has read ``ids``."""
        if self.limit_bytes <= 0:
            return
        key = tuple(ids)
        if key in self._states:
            self._states.move_to_end(key)
            return
        size = int(self._lib.llama_state_seq_get_size(ctx, 0))
        if size <= 0 or size > self.limit_bytes:
            return
        buf = (ctypes.c_uint8 * size)()
        written = int(self._lib.llama_state_seq_get_data(ctx, buf, size, 0))
        if written > 0:
            self.keep(key, bytes(buf)[:written])

    def keep(self, key: tuple[int, ...], data: bytes) -> None:
        self._states[key] = data
        self.bytes += len(data)
        while self.bytes > self.limit_bytes and self._states:
            _, dropped = self._states.popitem(last=False)
            self.bytes -= len(dropped)

    def load(self, key: tuple[int, ...], file: Path) -> bool:
        """Bring the state saved in ``file`` into memory as ``key``; ``False`` if it cannot be read."""
        try:
            saved = unseal(file.read_bytes())
        except OSError as exc:
            logger.warning("could not read the saved state %s: %s", file, exc)
            return False
        except ValueError as exc:  # loaded, it would give wrong verdicts, not an error
            logger.warning("removed the saved state %s (%s); reading its prompt afresh", file, exc)
            file.unlink(missing_ok=True)
            return False
        self.keep(key, saved)
        self._files[key] = file
        with contextlib.suppress(OSError):  # used now: the last to go when the folder is over budget
            os.utime(file)
        return True

    def write(self, key: tuple[int, ...], file: Path) -> None:
        """Write the kept state ``key`` to ``file`` (atomically, sealed with its checksum: a state
        damaged on disk since is removed by :meth:`load`, not restored); a read-only folder only
        costs the next process a read."""
        data = self._states.get(key)
        if data is None:
            return
        try:
            atomic_write_sealed(file, data)
        except OSError as exc:
            logger.warning("could not keep the prompt's state in %s: %s", file, exc)
            return
        if self.disk_limit_bytes is not None:
            evict_states(file.parent, self.disk_limit_bytes, keep=file)
