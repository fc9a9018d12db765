"""The llama.cpp read: log-prob verdicts and hidden states from a GGUF model run in-process.

:class:`LlamaCppVerdicts` is what the reading detectors use; the ``probe`` baseline's
:class:`~scopeguard.detection.read.llamacpp_probe.LlamaCppHiddenStates` reads through it: one
loader (:func:`scopeguard.llamacpp.load_llama`), one tap. Which kept prompt states
(:class:`~scopeguard.detection.read.llama_states.KeptStates`) the scorer holds, restores, joins and
counts is its base's bookkeeping (:class:`~scopeguard.detection.read._llama_keeping.LlamaStateKeeping`).

The prompt goes through the model's own chat template (read from the GGUF), is tokenised, and
only the tokens after the longest prefix already read are decoded: the instruction comes first and
the documents next, so questions about a document read it once. The state after each recent prompt
is kept in memory (``state_cache_mb``, least recently used first out), so a document is reused even
when others were read in between. :meth:`LlamaCppVerdicts.score_set` joins several passages' kept
states and reads a question once against them all. Only the last position's logits are computed.

The instruction every verdict prompt starts with is read once per model: :meth:`~LlamaCppVerdicts.prime`
keeps the state after it on disk (``$SCOPEGUARD_CACHE/llama-states``, keyed by the model file, the
llama.cpp version, the KV type and the tokens), so a new process starts reading at the first document.
``layers=(...)`` also returns those layers' hidden states at the verdict position (the last prompt
token) from the same decode, through llama.cpp's eval callback (:class:`~scopeguard.llamacpp.LayerTap`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard._optional import require
from scopeguard.detection.read._llama_keeping import LlamaStateKeeping
from scopeguard.detection.read._verdict_prompt import TEMPLATE, document_block, question_cut, split_tokens
from scopeguard.detection.read.adapter import file_sha256, gguf_reading
from scopeguard.detection.read.base import NO_WORDS, YES_WORDS, VerdictScore, verdict_from_logits
from scopeguard.detection.read.llama_prompt import chat_formatter, render_prompt, single_token_ids, wanted_bos
from scopeguard.detection.read.llama_states import common_prefix, get_kv_type, prefix_tokens
from scopeguard.errors import ConfigurationError, DocumentTooLongError, LLMError, ModelError
from scopeguard.llamacpp import decode, load_llama, logits_row
from scopeguard.llm.base import ChatMessage

__all__ = ["LlamaCppVerdicts"]

logger = logging.getLogger(__name__)


def _env_threads() -> int | None:
    raw = os.environ.get("SCOPEGUARD_N_THREADS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


class LlamaCppVerdicts(LlamaStateKeeping):
    """Verdict log-probs from a local GGUF (``"qwen2.5-coder-1.5b"``, a path, or a hub file).

    Args:
        model: a packaged short name, a ``.gguf`` path or a Hugging Face ``repo_id/file.gguf``
            (see :func:`scopeguard.models.local_gguf`), or a tuned reader's folder.
        adapter: a GGUF LoRA adapter file (or a tuned reader's folder) read over ``model``; its
            key joins the name (``qwen2.5-coder-0.5b+lora-1a2b3c4d5e6f``) and the saved states'.
        n_ctx: the context window in tokens (prompts longer than this raise
            :class:`~scopeguard.errors.DocumentTooLongError`; the detector chunks documents first).
        n_threads: CPU threads (default ``$SCOPEGUARD_N_THREADS``, else all cores).
        n_gpu_layers: layers to offload where llama.cpp was built with a GPU backend.
        state_cache_mb: memory for the saved states of recent prompts (per token of the 1.5B model:
            about 28 KB with ``kv_type="f16"``, 15 KB with ``"q8_0"``); 0 keeps only the last prompt's.
        state_dir: where :meth:`prime` keeps the instruction's state across processes (default
            ``$SCOPEGUARD_CACHE/llama-states``; ``None`` with ``persist_states=False``: memory only).
        state_disk_mb: that folder's budget: past it, the states used least recently are removed
            (default ``$SCOPEGUARD_STATE_DISK_MB``, else 10240).
        layers: hidden-state layers to return with each score (``VerdictScore.hidden``), numbered
            like transformers' ``hidden_states`` (``-1`` the final normed state, ``-4`` the output
            of the fourth block from the top); empty: log-probs only.
        kv_type: the KV cache's type, and so the kept states' (:data:`~scopeguard.detection.read.
            llama_states.KV_TYPES`; default ``$SCOPEGUARD_KV_TYPE``, else :data:`~scopeguard.
            detection.read.llama_states.DEFAULT_KV_TYPE`): ``"f16"`` (28 KB a token) or
            ``"q8_0"`` (about 15 KB, with llama.cpp's flash attention; the same label as f16 on 198
            of 200 questions: ``benchmarks/state_agreement.py``). The type is part of a state's key.
    """

    def __init__(
        self,
        model: str | Path = "qwen2.5-coder-1.5b",
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        state_cache_mb: float = 256.0,
        state_dir: str | Path | None = None,
        persist_states: bool = True,
        state_disk_mb: float | None = None,
        layers: Sequence[int] = (),
        adapter: str | Path | None = None,
        kv_type: str | None = None,
    ) -> None:
        from scopeguard.models import available_ggufs, local_gguf

        kv = get_kv_type(kv_type)

        self._lib = require(
            "llama_cpp", extra="local", feature="log-prob verdicts with llama.cpp", package="llama-cpp-python"
        )
        self._reading = reading = gguf_reading(model, adapter)
        self.path = local_gguf(reading.base)
        self.adapter: Path | None = reading.adapter
        self._adapter_sha = None if reading.adapter is None else file_sha256(reading.adapter)
        self._template = reading.template
        self._adapter_on = True
        self._warned_cut = False
        self._name = (reading.base if reading.base in available_ggufs() else self.path.stem) + reading.suffix
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _env_threads() or os.cpu_count() or 1
        self.n_gpu_layers = n_gpu_layers
        super().__init__(
            self._lib,
            self.path,
            kv=kv,
            suffix=reading.suffix,
            adapter_sha=self._adapter_sha,
            # a question-side adapter: instruction and documents read by the bare base (their
            # states are the base's, shared with it), the question on with the adapter
            question_side=reading.adapter is not None and reading.adapt == "question",
            state_cache_mb=state_cache_mb,
            state_dir=state_dir,
            persist_states=persist_states,
            state_disk_mb=state_disk_mb,
        )
        self._yes: list[int] = []
        self._no: list[int] = []
        self._formatter: Any = None
        self._bos: int | None = None  # prepended to every prompt, where the model wants one
        self._tap: Any = None
        if layers:
            from scopeguard.llamacpp import LayerTap

            self._tap = LayerTap(self._lib, layers)

    @property
    def layers(self) -> tuple[int, ...]:
        """The hidden-state layers returned with each score (resolved once the model is loaded)."""
        if self._tap is None:
            return ()
        self._load()
        return tuple(self._tap.layers)

    @property
    def name(self) -> str:
        """The packaged short name (``qwen2.5-coder-1.5b``) or the file's stem, and ``+lora-...``."""
        return self._name

    def __repr__(self) -> str:
        lora = "" if self.adapter is None else f", adapter={str(self.adapter)!r}"
        kv = f"kv_type={self.kv_type!r}"
        return f"LlamaCppVerdicts(path={str(self.path)!r}{lora}, n_ctx={self.n_ctx}, {kv})"

    # -- loading ----------------------------------------------------------------------------
    def load(self) -> None:
        """Load the model now (otherwise on the first prompt)."""
        self._load()

    def _load(self) -> Any:
        if self._llm is not None:
            return self._llm
        llm = load_llama(
            self.path,
            purpose="log-prob verdicts",
            adapter=self.adapter,
            n_ctx=self.n_ctx,
            n_batch=min(self.n_ctx, 2048),
            n_ubatch=min(self.n_ctx, 512),
            n_threads=self.n_threads,
            n_gpu_layers=self.n_gpu_layers,
            eval_callback=None if self._tap is None else self._tap.callback,
            sequences=2,  # kept passage states join through the second (score_set)
            **self._kv.llama_params(self._lib),
        )
        if self._tap is not None:
            try:
                self._tap.bind(int(self._lib.llama_model_n_layer(llm.model)), int(llm.n_embd()))
            except Exception:
                llm.close()
                raise
        self._formatter = chat_formatter(llm)
        self._bos = wanted_bos(llm)
        self._yes = single_token_ids(llm, YES_WORDS)
        self._no = single_token_ids(llm, NO_WORDS)
        if not self._yes or not self._no:
            raise ModelError(f"{self.path.name}: the tokenizer has no single token for Yes or No")
        self._llm = llm
        return llm

    # -- prompts ----------------------------------------------------------------------------
    def render(self, messages: Sequence[ChatMessage]) -> str:
        """The prompt text the model reads (its chat template, generation prompt appended)."""
        self._load()
        return render_prompt(self._formatter, messages)

    def _ids(self, messages: Sequence[ChatMessage]) -> list[int]:
        return self._tokens(self.render(messages))

    def _tokens(self, text: str) -> list[int]:
        """The prompt text's token ids (special tokens parsed), with BOS where the model wants one."""
        llm = self._load()
        ids = list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))
        if self._bos is not None and (not ids or ids[0] != self._bos):
            ids.insert(0, self._bos)
        return ids

    def count_tokens(self, text: str) -> int:
        llm = self._load()
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- scoring ----------------------------------------------------------------------------
    def _split(self, text: str, ids: list[int]) -> int | None:
        """How many of the prompt's ``ids`` a question-side adapter leaves to the bare base (the
        instruction and documents; see :func:`~scopeguard.detection.read.reader.question_cut`),
        or ``None`` where the adapter reads every token."""
        if not self._question_side:
            return None
        cut = question_cut(text, self._template)
        if cut is None:  # not the prompt it was trained on: the base model's read
            if not self._warned_cut:
                self._warned_cut = True
                logger.warning(
                    "%s: a prompt without the %r question block is read by the bare base",
                    self.name,
                    self._template,
                )
            return len(ids)
        return split_tokens(self._tokens(text[:cut]), ids)

    def _adapter(self, on: bool) -> None:
        if self._question_side and on != self._adapter_on:
            from scopeguard.llamacpp import set_adapter

            set_adapter(self._llm, on)
            self._adapter_on = on

    def _read(self, ids: list[int], *, logits: bool, keep: int | None = None, bare: int | None = None) -> int:
        """Bring the context to ``ids``, from the longest prefix already read (the live context or a
        saved state), decoding only the rest; the index of the last logits row. ``logits``: decode
        at least the last token, whose logits the caller reads. ``keep``: reuse at most this many
        tokens (a fixed split, for reads that must not depend on what was read before). Call with
        the lock held. On a failure the context counts as empty (the next read starts afresh).
        ``bare``: a question-side adapter's split (:meth:`_split`): tokens before it are read by the
        bare base, the rest with the adapter (``None``: every token as the model is loaded)."""
        ctx = self._llm._ctx
        try:
            shared = min(common_prefix(self._past, ids), len(ids) if keep is None else keep)
            if keep is None:  # a saved state may share more
                shared = self._restore_best(ids, shared) or shared
            if logits:
                shared = min(shared, len(ids) - 1)
            if shared == 0 or not ctx.kv_cache_seq_rm(-1, shared, -1):
                ctx.kv_cache_clear()
                shared = 0
            self._past = []
            row = 0
            if bare is not None and shared < bare:
                self._adapter(False)
                row = decode(self._llm, ids[shared:bare], shared)
                shared = bare
            if shared < len(ids):
                self._adapter(bare is None or bare < len(ids))
                row = decode(self._llm, ids[shared:], shared)
        except BaseException:  # a Ctrl-C too: the context may hold part of a restore or a decode
            self._past = []
            raise
        self._past = list(ids)
        return row

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        text = self.render(messages)
        ids = self._tokens(text)
        if len(ids) >= self.n_ctx:
            raise DocumentTooLongError(
                f"the verdict prompt ({len(ids)} tokens) does not fit the context window of "
                f"{self.name} ({self.n_ctx} tokens): split the documents or raise n_ctx",
                n_tokens=len(ids),
                limit=self.n_ctx,
            )
        with self._lock:
            llm = self._llm
            ctx = llm._ctx
            hidden: np.ndarray | None = None
            if self._tap is not None:
                self._tap.start()
            try:
                row = self._read(ids, logits=True, bare=self._split(text, ids))
                logits = logits_row(llm, row)
            except BaseException as exc:  # a Ctrl-C too, held until the decode returned (llamacpp._decode)
                if self._tap is not None:
                    self._tap.abort()
                if isinstance(exc, Exception):
                    raise LLMError(f"llama.cpp failed to read the verdict prompt: {exc}") from None
                raise
            if self._tap is not None:
                hidden = self._tap.stop()  # a ModelError if the graph had no such layer
            self._kept.capture(ctx.ctx, ids)
        return self._verdict(logits, len(ids), hidden)

    def _verdict(self, logits: np.ndarray, n_tokens: int, hidden: np.ndarray | None) -> VerdictScore:
        return verdict_from_logits(logits, self._yes, self._no, n_tokens=n_tokens, hidden=hidden)

    def score_set(
        self, prompts: Sequence[Sequence[ChatMessage]], *, template: str = TEMPLATE
    ) -> VerdictScore:
        """One verdict for a question against several passages (``prompts``: its verdict prompts of
        ``template``, one per passage), read once: the passages' kept states (read first where
        there are none) joined in one sequence (``_join``), then the question. A block attends to the
        instruction and itself only: the margins are a set's; one prompt reads as :meth:`score`."""
        if self._question_side:
            raise ConfigurationError("a question-side adapter reads passage by passage, not as a set")
        texts = [self.render(m) for m in prompts]
        self._check_joinable()
        blocks = [document_block(t, template) for t in texts]
        if not texts or any(b is None for b in blocks):
            raise ConfigurationError(f"set reads need one or more verdict prompts of {template!r}")
        parts: list[tuple[list[int], int]] = []
        for text, (_, ends, cut) in zip(texts, blocks, strict=True):  # type: ignore[misc]
            key = self._tokens(text[:cut])[:-1]  # as prime() keeps it
            parts.append((key, prefix_tokens(self._tokens(text[:ends]), key)))
        # the blocks start where the instruction ends: the same text, before the passage, in every prompt
        start = prefix_tokens(self._tokens(texts[0][: blocks[0][0]]), parts[0][0])  # type: ignore[index]
        tail = self._tokens(texts[-1])[parts[-1][1] :]
        size = parts[0][1] + sum(end - start for _, end in parts[1:])
        if size + len(tail) >= self.n_ctx:
            raise DocumentTooLongError(
                f"{len(texts)} passages and the question ({size + len(tail)} tokens) do not fit the context "
                f"window of {self.name} ({self.n_ctx} tokens)",
                n_tokens=size + len(tail),
                limit=self.n_ctx,
            )
        with self._lock:  # kept and joined under one hold: no other read evicts a state between
            held = self.state_cache_bytes > 0 and all([self._keep_held(key, create=True) for key, _ in parts])
            kept = [len(key) for key, _ in parts if tuple(key) in self._kept]
            if not held or len(kept) < len(parts):  # fewer passages at a time may fit: the caller splits
                what = f"{self.name}: state_cache_mb cannot hold {len(texts)} passages together"
                if len(parts) == 1 or self.state_cache_bytes <= 0:
                    raise ConfigurationError(what)
                raise DocumentTooLongError(what, n_tokens=sum(len(key) for key, _ in parts), limit=sum(kept))
            if self._tap is not None:
                self._tap.start()
            try:
                joined = parts[0][0][: parts[0][1]] + [t for key, end in parts[1:] for t in key[start:end]]
                if common_prefix(self._past, joined) < size:
                    self._past = self._join(parts, start)
                row = self._read(joined + tail, logits=True, keep=size + len(tail))
                logits = logits_row(self._llm, row)
            except BaseException as exc:
                if self._tap is not None:
                    self._tap.abort()
                self._past = []
                if isinstance(exc, Exception) and not isinstance(exc, ConfigurationError):
                    raise LLMError(f"llama.cpp failed to read the passages as a set: {exc}") from None
                raise
            hidden = None if self._tap is None else self._tap.stop()
        return self._verdict(logits, size + len(tail), hidden)

    def hidden(self, ids: Sequence[int], *, prefix_len: int = 0) -> np.ndarray:
        """The states of :attr:`layers` at the last of ``ids``, shape ``(len(layers), n_embd)``.

        ``ids`` are read as they are (no chat template, no BOS added) through the same tap and
        decode as :meth:`score`: what the paper's probe reads (:class:`LlamaCppHiddenStates`).
        The read is always split at ``prefix_len``: ``ids[:prefix_len]`` (e.g. instruction and
        document) is reused when the context holds it and otherwise read on its own first, and the
        rest is decoded after it, so the states are the same bits whether or not the prefix was
        kept from an earlier call."""
        if self._tap is None:
            raise ConfigurationError("hidden() needs a scorer built with layers=(...)")
        ids = [int(i) for i in ids]
        self._load()
        if not ids or len(ids) >= self.n_ctx:
            raise DocumentTooLongError(
                f"the input ({len(ids)} tokens) does not fit the context window of {self.name} "
                f"({self.n_ctx} tokens)",
                n_tokens=len(ids),
                limit=self.n_ctx,
            )
        split = max(0, min(prefix_len, len(ids) - 1))
        with self._lock:
            try:
                if split and common_prefix(self._past, ids) < split:
                    self._read(ids[:split], logits=False, keep=0)
                self._tap.start()
                self._read(ids, logits=True, keep=split)
            except BaseException as exc:
                self._tap.abort()
                if isinstance(exc, Exception):
                    raise LLMError(f"llama.cpp failed to read the probe input: {exc}") from None
                raise
            return np.asarray(self._tap.stop(), dtype=np.float32)

    # -- the shared instruction -----------------------------------------------------------------
    def prime(self, messages: Sequence[ChatMessage], *, upto: str, create: bool = True) -> int:
        """Read the start of ``messages``' prompt, up to the text ``upto`` (a placeholder, e.g.
        where the first document or the question goes), and keep the state after it for every
        later prompt that starts the same way; returns the number of tokens primed (0 if ``upto``
        is not in the prompt, or if ``create`` is false and no kept state holds it).

        The state is written to ``state_dir`` and read back by the next process instead of decoding
        that text again (a state that llama.cpp refuses is read afresh). ``create=False`` only looks
        for a kept state that holds the text (the live context, memory, then ``state_dir``), reads
        nothing, and counts the lookup and whether it found one (:meth:`state_stats`). Scores are a
        fresh read's up to llama.cpp's rounding (1.5B margins: median 0.05 apart over 8 questions).
        """
        text = self.render(messages)
        if upto not in text:
            return 0
        # the last token may merge with the text after it: leave it to the prompt
        ids = self._tokens(text.split(upto, 1)[0])[:-1]
        return self._keep_prefix(ids, create=create)

    def score_many(
        self, prompts: Sequence[Sequence[ChatMessage]], *, progress: bool | None = None
    ) -> list[VerdictScore]:
        from scopeguard._progress import progress_bar

        return [self.score(p) for p in progress_bar(prompts, desc="verdicts", enabled=progress)]
