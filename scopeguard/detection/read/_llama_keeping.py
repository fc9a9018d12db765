"""The state bookkeeping of the llama.cpp read: the prompt states kept for one model.

:class:`LlamaStateKeeping` is the half of
:class:`~scopeguard.detection.read.llamacpp.LlamaCppVerdicts` that knows which prompt states it
holds: the tokens of the live context, the states kept in memory and on disk
(:class:`~scopeguard.detection.read.llama_states.KeptStates`, keyed by the model file, the
llama.cpp version, an adapter and the KV cache's type), which of them to restore before a read,
the state after the shared start of the verdict prompts (what ``prime`` keeps), and the lookups and
hits (:meth:`LlamaStateKeeping.state_stats`). The scorer loads the model, renders and tokenises the
prompts, decodes them and reads the verdict from the logits.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from scopeguard._paths import cache_dir
from scopeguard.detection.read.llama_states import (
    KeptStates,
    KeptStateStats,
    KvType,
    common_prefix,
    saved_states_summary,
    state_disk_budget_mb,
)
from scopeguard.errors import ConfigurationError, LLMError

__all__ = ["LlamaStateKeeping"]

logger = logging.getLogger("scopeguard.detection.read.llamacpp")


class LlamaStateKeeping:
    """The prompt states kept for a llama.cpp model (a base class: the scorer loads the model into
    ``_llm`` and reads with ``_read``).

    Args:
        lib: the ``llama_cpp`` module.
        path: the model file; its name, size and the llama.cpp version make the states' key.
        kv: the KV cache's type, and so the kept states'.
        suffix: what the scorer's name adds to the file's stem (``+lora-...``).
        adapter_sha: the adapter file's digest (``None``: no adapter); part of the states' key
            unless the adapter is question-side.
        question_side: the adapter reads only the question: the instruction and documents are read
            by the bare base, so their states are the base's (no adapter in their key or name).
        state_cache_mb, state_dir, persist_states, state_disk_mb: as
            :class:`~scopeguard.detection.read.llamacpp.LlamaCppVerdicts` takes them.
    """

    #: a saved state is restored only when it shares this many more tokens than the live one
    MIN_STATE_GAIN = 16

    def __init__(
        self,
        lib: Any,
        path: Path,
        *,
        kv: KvType,
        suffix: str,
        adapter_sha: str | None,
        question_side: bool,
        state_cache_mb: float,
        state_dir: str | Path | None,
        persist_states: bool,
        state_disk_mb: float | None,
    ) -> None:
        self._kv = kv
        self._lib = lib
        self._question_side = question_side
        if state_cache_mb < 0:
            raise ValueError(f"state_cache_mb must be >= 0, got {state_cache_mb}")
        self.state_cache_bytes = int(state_cache_mb * 2**20)
        self.state_dir: Path | None = None
        if persist_states:
            self.state_dir = Path(state_dir) if state_dir is not None else cache_dir("llama-states")
        stat = path.stat()
        file_key = f"{path.name}:{stat.st_size}:{lib.__version__}:"
        if adapter_sha is not None and not question_side:  # else the base's states
            file_key += f"adapter:{adapter_sha}:"
        self._kept = KeptStates(
            lib,
            limit_bytes=self.state_cache_bytes,
            directory=self.state_dir,
            file_key=file_key,
            stem=path.stem + ("" if question_side else suffix),
            disk_limit_bytes=int(state_disk_budget_mb(state_disk_mb) * 2**20),
            kv=kv.name,
        )
        self._llm: Any = None
        self._lock = threading.Lock()
        self._past: list[int] = []

    @property
    def kv_type(self) -> str:
        """The KV cache's type (``"f16"``, ``"q8_0"``): the kept states' too."""
        return self._kv.name

    def _read(self, ids: list[int], *, logits: bool, keep: int | None = None, bare: int | None = None) -> int:
        """Bring the context to ``ids`` (the scorer's read; lock held): the index of the last logits
        row."""
        raise NotImplementedError

    def forget(self) -> None:
        """Drop the live context: the next read starts from nothing (or from a saved state)."""
        with self._lock:
            self._past = []

    # -- kept states -------------------------------------------------------------------------
    def _keep_prefix(self, ids: list[int], *, create: bool) -> int:
        """``prime`` for the tokens ``ids`` of a prompt's start: find a kept state that holds them,
        else (``create``) read them and keep the state after them, in memory and in ``state_dir``;
        the number of tokens primed (0: too few to keep, or not found with ``create=False``)."""
        if len(ids) < self.MIN_STATE_GAIN or self.state_cache_bytes <= 0:
            return 0
        with self._lock:
            return self._keep_held(ids, create=create)

    def _keep_held(self, ids: list[int], *, create: bool) -> int:
        """:meth:`_keep_prefix` with the lock held (and ``ids`` long enough to keep)."""
        key = tuple(ids)
        file = self._kept.file(ids)
        # a lookup (before a read) also counts the live context's tokens as found
        found = key in self._kept or (not create and self._covered(ids))
        if not found and file is not None and file.is_file() and self._kept.load(key, file):
            logger.debug("primed %d tokens from %s", len(ids), file)
            found = True
        if not create:  # counted, found or not (state_stats)
            self._kept.lookups += 1
            self._kept.hits += found
        if found or not create:
            return len(ids) if found else 0
        try:
            # from the instruction's state, for a document; the base's alone for a question-side adapter
            self._read(ids, logits=False, bare=len(ids) if self._question_side else None)
        except Exception as exc:
            raise LLMError(f"llama.cpp failed to read the start of the verdict prompt: {exc}") from None
        self._kept.capture(self._llm._ctx.ctx, ids)
        if file is not None:
            self._kept.write(key, file)
        return len(ids)

    def _covered(self, ids: list[int]) -> bool:
        """Whether the live context or a kept state already holds all of ``ids`` (lock held)."""
        live = common_prefix(self._past, ids) >= len(ids)
        return live or self._kept.longest(ids, len(ids) - 1)[0] is not None

    def state_stats(self) -> KeptStateStats:
        """The kept states: KV type, lookups and hits (reads that found their document's state kept),
        memory, and the saved-states folder's files, bytes and tokens (a scan of the folder)."""
        kept = self._kept
        return KeptStateStats(
            kv_type=self.kv_type,
            lookups=kept.lookups,
            hits=kept.hits,
            memory_states=len(kept),
            memory_bytes=kept.bytes,
            directory=self.state_dir,
            saved=None if self.state_dir is None else saved_states_summary(self.state_dir),
        )

    def _check_joinable(self) -> None:
        """Raise :class:`ConfigurationError` where the loaded context cannot join kept states: bindings
        without a KV cache shared by two sequences, or a cache that cannot move cells."""
        lib, ctx = self._lib, self._llm._ctx
        if int(lib.llama_n_seq_max(ctx.ctx)) < 2:
            raise ConfigurationError(
                f"llama-cpp-python {lib.__version__} cannot join kept states (no KV cache shared by two "
                "sequences): upgrade it, or read passage by passage"
            )
        if not lib.llama_memory_can_shift(ctx.memory):
            raise ConfigurationError(f"the {self._kv.name} KV cache of this model cannot move kept states")

    def _join(self, parts: list[tuple[list[int], int]], start: int) -> list[int]:
        """Bring sequence 0 to kept states joined (lock held): ``parts`` are each passage's kept
        prompt start (instruction, document; a key of the kept states) and where its block ends.
        The first state is restored whole up to its block's end; each next one is restored into
        sequence 1, cut to its block (from token ``start``: the instruction before it is the
        same in every state), moved to follow what is there, and copied to sequence 0. A block's
        tokens attend to the instruction and themselves, not to the blocks before it. Returns the
        joined tokens; on a failure the context counts as empty."""
        lib, ctx = self._lib, self._llm._ctx
        mem = ctx.memory
        self._past = []
        ctx.kv_cache_clear()
        joined: list[int] = []
        for n, (key, end) in enumerate(parts):
            seq = 0 if n == 0 else 1
            if not self._kept.restore(ctx, tuple(key), seq):
                raise LLMError("llama.cpp refused a kept passage state")
            if n == 0:
                lib.llama_memory_seq_rm(mem, 0, end, -1)
                joined = list(key[:end])
                continue
            lib.llama_memory_seq_rm(mem, 1, 0, start)
            lib.llama_memory_seq_rm(mem, 1, end, -1)
            lib.llama_memory_seq_add(mem, 1, start, end, len(joined) - start)
            lib.llama_memory_seq_cp(mem, 1, 0, -1, -1)
            lib.llama_memory_seq_rm(mem, 1, -1, -1)
            joined += key[start:end]
        return joined

    def _restore_best(self, ids: list[int], live: int) -> int:
        """Load the kept state sharing the longest prefix with ``ids`` if it beats the live one by
        :attr:`MIN_STATE_GAIN` tokens; how many tokens it shares with ``ids`` (0: none loaded)."""
        key, shared = self._kept.longest(ids, live + self.MIN_STATE_GAIN)
        if key is None:
            return 0
        ctx = self._llm._ctx
        ctx.kv_cache_clear()
        self._past = []
        if not self._kept.restore(ctx, key):
            return 0
        self._past = list(key)
        return shared
