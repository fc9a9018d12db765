"""The one place scopeguard constructs a ``llama_cpp.Llama``.

Every llama.cpp entry point (the reading stage's verdicts, the local chat model, the probe's
hidden states, the llama.cpp server) opens its model through :func:`load_llama`, which

1. checks the file first (missing, not GGUF: a :class:`~scopeguard.errors.ModelError` naming the
   file and the fix, never a native crash), and
2. turns llama.cpp's *extra buffer types* (weight repacking: ``CPU_REPACK``, ``AMX``) on only
   where :func:`~scopeguard.llamacpp.extra_buffers_decision` found them safe on this CPU.

``llama_cpp.Llama`` fills its model parameters from ``llama_model_default_params()`` itself and
takes no ``use_extra_bufts`` argument, so the flag is set by swapping that function for the
duration of one construction (under a lock) and checked on the loaded model afterwards. An eval
callback (``cb_eval``, how :class:`~scopeguard.llamacpp.LayerTap` reads hidden states) is set the
same way, through ``llama_context_default_params()``.

A LoRA adapter (``adapter=``, a GGUF adapter such as a tuned reader's ``adapter.gguf``) is applied
after construction through llama.cpp's adapter API (``llama_adapter_lora_init``,
``llama_set_adapters_lora``, scale 1: llama.cpp applies alpha / rank itself), unmerged, with the
base still memory-mapped (``Llama(lora_path=...)`` would turn mmap off). The adapter lives and is
freed with the ``Llama``. One llama.cpp cannot apply (missing, not GGUF, another architecture,
other shapes: its init returns NULL) is a :class:`~scopeguard.errors.ModelError` naming the
adapter, the base and llama.cpp's reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scopeguard._optional import require
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.llamacpp._decode import interrupts_held

__all__ = [
    "check_adapter",
    "check_gguf",
    "construct",
    "default_extra_buffers",
    "load_llama",
    "set_adapter",
    "supports_extra_buffers",
]

logger = logging.getLogger(__name__)

_GGUF_MAGIC = b"GGUF"
_CONSTRUCT_LOCK = threading.Lock()


def _llama_cpp() -> Any:
    return require("llama_cpp", extra="local", feature="llama.cpp models", package="llama-cpp-python")


def _fix(path: Path) -> str:
    from scopeguard.models import reinstall_hint

    return reinstall_hint(path)


def _head(path: Path, what: str) -> bytes:
    """The first four bytes of ``path`` (``what`` names it in the error when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            return fh.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read the {what} {path}: {exc}") from None


def check_gguf(model_path: str | Path) -> Path:
    """``model_path`` as a Path, or a :class:`ModelError` when it is missing or not a GGUF file."""
    path = Path(model_path)
    if not path.is_file():
        raise ModelError(f"GGUF model file not found: {path}. {_fix(path)}")
    head = _head(path, "model file")
    if head != _GGUF_MAGIC:
        raise ModelError(
            f"{path} is not a GGUF file (it starts with {head!r}, not {_GGUF_MAGIC!r}). {_fix(path)}"
        )
    return path


def check_adapter(adapter: str | Path, base: str | Path) -> Path:
    """``adapter`` as a Path, or a :class:`ModelError` naming it and ``base`` when it is missing or
    not a GGUF file (whether it fits ``base`` only llama.cpp can tell, when it applies it)."""
    path = Path(adapter)
    if not path.is_file():
        raise ModelError(f"LoRA adapter not found: {path} (for the base model {Path(base).name})")
    head = _head(path, "LoRA adapter")
    if head != _GGUF_MAGIC:
        raise ModelError(
            f"the LoRA adapter {path} is not a GGUF file (it starts with {head!r}): llama.cpp reads "
            f"GGUF adapters (a tuned reader's adapter.gguf); PEFT adapters are read with transformers"
        )
    return path


@contextlib.contextmanager
def _llama_log(lib: Any) -> Iterator[list[str]]:
    """What llama.cpp logs meanwhile (the bindings' own callback drops its errors where not
    verbose: it maps their level to DEBUG), then the bindings' callback again. Nothing is
    captured where the bindings have no callback of their own to go back to."""
    pieces: list[str] = []
    bindings = lib.llama_cpp
    own = getattr(getattr(lib, "_logger", None), "llama_log_callback", None)
    if own is None or not hasattr(bindings, "llama_log_set"):
        yield pieces
        return

    def record(level: int, text: bytes, user_data: Any) -> None:
        with contextlib.suppress(Exception):
            pieces.append(text.decode("utf-8", errors="replace"))

    callback = bindings.llama_log_callback(record)  # kept alive until restored below
    bindings.llama_log_set(callback, ctypes.c_void_p(0))
    try:
        yield pieces
    finally:
        bindings.llama_log_set(own, ctypes.c_void_p(0))


def _llama_error(captured: str) -> str:
    """llama.cpp's last error line from its captured log (how it says why an adapter failed)."""
    lines = [line.strip() for line in captured.splitlines() if line.strip()]
    failed = [line for line in lines if "failed" in line or "error" in line.lower()]
    last = (failed or lines or ["no reason given"])[-1]
    return last.split(": ", 1)[-1] if last.startswith("llama_") else last


def _apply_adapter(lib: Any, llm: Any, adapter: Path, base: Path) -> None:
    """Apply the GGUF LoRA ``adapter`` to ``llm`` (scale 1), freed when ``llm`` closes; on a
    failure ``llm`` is closed and a :class:`ModelError` raised with llama.cpp's reason."""
    bindings = lib.llama_cpp
    init: Any = getattr(bindings, "llama_adapter_lora_init", None)
    many: Any = getattr(bindings, "llama_set_adapters_lora", None)  # newer bindings
    one: Any = getattr(bindings, "llama_set_adapter_lora", None)  # older ones
    if init is None or (many is None and one is None):
        llm.close()
        raise ModelError(
            f"llama-cpp-python {lib.__version__} cannot apply LoRA adapters through llama.cpp's adapter "
            f"API (needed for {adapter}): upgrade it (pip install -U llama-cpp-python)"
        )
    with _llama_log(lib) as log:
        pointer = init(llm.model, str(adapter).encode("utf-8"))
    if not pointer:  # a NULL pointer: llama.cpp refused the file and logged why
        llm.close()
        raise ModelError(
            f"llama.cpp could not apply the LoRA adapter {adapter} to the base model {base.name}: "
            f"{_llama_error(''.join(log))}. The adapter must be a GGUF LoRA adapter trained on this "
            "base (same architecture and tensor shapes)"
        )
    ctx = llm.ctx
    adapters = (bindings.llama_adapter_lora_p_ctypes * 1)(pointer)
    scales = (ctypes.c_float * 1)(1.0)

    def switch(on: bool) -> int:
        if many:
            return int(many(ctx, adapters, 1, scales) if on else many(ctx, None, 0, None))
        return int(one(ctx, pointer, 1.0 if on else 0.0))

    status = switch(True)
    if status != 0:
        bindings.llama_adapter_lora_free(pointer)
        llm.close()
        raise ModelError(
            f"llama.cpp could not set the LoRA adapter {adapter} on {base.name} (status {status})"
        )

    def detach_and_free() -> None:  # runs before the context and the model are freed
        with contextlib.suppress(Exception):
            if many:
                many(ctx, None, 0, None)
            bindings.llama_adapter_lora_free(pointer)

    llm._scopeguard_adapter = pointer  # alive as long as the Llama
    llm._scopeguard_adapter_switch = switch
    stack = getattr(llm, "_stack", None)
    if stack is not None:  # else the model's destructor frees it
        stack.callback(detach_and_free)


def set_adapter(llm: Any, enabled: bool) -> None:
    """Read the next decodes of ``llm`` with the LoRA adapter it was loaded with (``enabled``) or
    with the bare base; a :class:`ModelError` when llama.cpp refuses, a
    :class:`~scopeguard.errors.ConfigurationError` when ``llm`` was loaded without an adapter."""
    switch = getattr(llm, "_scopeguard_adapter_switch", None)
    if switch is None:
        raise ConfigurationError("this model was loaded without a LoRA adapter (load_llama(adapter=...))")
    status = switch(enabled)
    if status != 0:
        state = "on" if enabled else "off"
        raise ModelError(f"llama.cpp could not turn the LoRA adapter {state} (status {status})")


def supports_sequences(lib: Any | None = None) -> bool:
    """Whether these bindings can give a context several sequences in one shared KV cache and move
    cells between them (what joining kept states needs); older ones would split the context."""
    lib = lib or _llama_cpp()
    fields = dict(lib.llama_context_params._fields_)
    return "kv_unified" in fields and all(
        hasattr(lib, f"llama_memory_seq_{op}") for op in ("rm", "add", "cp")
    )


def supports_extra_buffers(lib: Any | None = None) -> bool:
    """Whether these llama-cpp-python bindings can turn extra buffer types off."""
    lib = lib or _llama_cpp()
    return "use_extra_bufts" in dict(lib.llama_model_params._fields_)


def default_extra_buffers(extra_buffers: bool) -> None:
    """Make every later ``Llama()`` in this process use ``extra_buffers`` (for a process that
    only serves one model, such as the llama.cpp server child; elsewhere use :func:`construct`)."""
    lib = _llama_cpp()
    if supports_extra_buffers(lib):
        lib.llama_cpp.llama_model_default_params = _with_extra_buffers(
            lib.llama_cpp.llama_model_default_params, extra_buffers
        )


def _with_extra_buffers(original: Any, extra_buffers: bool) -> Any:
    def default_params() -> Any:
        params = original()
        params.use_extra_bufts = extra_buffers
        return params

    return default_params


@contextlib.contextmanager
def _extra_buffers_set(lib: Any, extra_buffers: bool) -> Iterator[None]:
    if not supports_extra_buffers(lib):
        yield
        return
    bindings = lib.llama_cpp
    original = bindings.llama_model_default_params
    bindings.llama_model_default_params = _with_extra_buffers(original, extra_buffers)
    try:
        yield
    finally:
        bindings.llama_model_default_params = original


@contextlib.contextmanager
def _context_params_set(lib: Any, callback: Any, sequences: int) -> Iterator[None]:
    """``Llama()`` builds its context from ``llama_context_default_params()`` and takes neither an
    eval callback nor a sequence count: both are set in those defaults while it is constructed."""
    if callback is None and sequences <= 1:
        yield
        return
    bindings = lib.llama_cpp
    original = bindings.llama_context_default_params

    def default_params() -> Any:
        params = original()
        if callback is not None:
            params.cb_eval = callback
            params.cb_eval_user_data = None
        if sequences > 1 and supports_sequences(lib):  # one KV buffer all sequences share
            params.n_seq_max = sequences
            params.kv_unified = True
        return params

    bindings.llama_context_default_params = default_params
    try:
        yield
    finally:
        bindings.llama_context_default_params = original


def construct(
    model_path: str | Path,
    *,
    extra_buffers: bool,
    eval_callback: Any = None,
    adapter: str | Path | None = None,
    sequences: int = 1,
    **params: Any,
) -> Any:
    """``llama_cpp.Llama(model_path, **params)`` with extra buffer types on or off, as given,
    ``eval_callback`` (a ``ggml_backend_sched_eval_callback``, kept alive by the caller) as the
    context's ``cb_eval``, the GGUF LoRA ``adapter`` applied (see the module docstring), and
    ``sequences`` sequences in one shared KV cache where the bindings can (:func:`supports_sequences`;
    a reader that joins kept states needs 2; elsewhere the context has one).

    No decision is made here: :func:`load_llama` decides; the canary child calls this directly.
    A load that fails raises :class:`ModelError` naming the file and the fix.
    """
    lib = _llama_cpp()
    path = check_gguf(model_path)
    lora = None if adapter is None else check_adapter(adapter, path)
    params.setdefault("verbose", False)
    # the bindings default prompt decoding to every core (n_threads_batch = cpu_count()): a thread
    # limit given for generation holds for prompts too, or a guard "on 1 thread" reads on all of them
    if params.get("n_threads") is not None:
        params.setdefault("n_threads_batch", params["n_threads"])
    # interrupts held: llama.cpp logs the load through a Python callback, where a Ctrl-C would be
    # raised and dropped by ctypes (llamacpp._decode.interrupts_held)
    with (
        _CONSTRUCT_LOCK,
        interrupts_held(),
        _extra_buffers_set(lib, extra_buffers),
        _context_params_set(lib, eval_callback, sequences),
    ):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                llm = lib.Llama(model_path=str(path), **params)
        except Exception as exc:
            size = path.stat().st_size
            raise ModelError(
                f"llama.cpp could not load {path} ({size:,} bytes): {exc}. The file may be truncated "
                f"or corrupt, or made for a newer llama.cpp. {_fix(path)}"
            ) from None
        if lora is not None:
            _apply_adapter(lib, llm, lora, path)
    got = getattr(llm.model_params, "use_extra_bufts", extra_buffers)
    if bool(got) != extra_buffers:  # the bindings changed how Llama() builds its parameters
        llm.close()
        raise ModelError(
            f"llama-cpp-python {lib.__version__} did not take use_extra_bufts={extra_buffers} for {path}; "
            "set SCOPEGUARD_LLAMA_EXTRA_BUFFERS=off and report this"
        )
    if eval_callback is not None and not getattr(llm.context_params, "cb_eval", None):
        llm.close()
        raise ModelError(
            f"llama-cpp-python {lib.__version__} did not take the eval callback for {path}: hidden "
            "states cannot be read with it; use layers=() (log-probs only) or the transformers backend"
        )
    return llm


def load_llama(
    model_path: str | Path,
    *,
    purpose: str,
    eval_callback: Any = None,
    adapter: str | Path | None = None,
    sequences: int = 1,
    **params: Any,
) -> Any:
    """Open ``model_path`` with llama.cpp for ``purpose`` (logged), with the safe parameters.

    ``params`` are ``llama_cpp.Llama`` keyword arguments (``n_ctx``, ``n_threads``, ``embedding``,
    ...). Extra buffer types are used only where :func:`extra_buffers_decision` allows them (for
    this base with this adapter). ``eval_callback``: the context's ``cb_eval`` (see
    :class:`~scopeguard.llamacpp.LayerTap`). ``adapter``: a GGUF LoRA adapter applied over the base.
    ``sequences``: sequences in the context's one KV cache (see :func:`construct`).
    """
    from scopeguard.llamacpp._canary import extra_buffers_decision

    path = check_gguf(model_path)
    lora = None if adapter is None else check_adapter(adapter, path)
    decision = extra_buffers_decision(path, adapter=lora)
    logger.info(
        "loading %s%s for %s (extra buffers %s: %s)",
        path.name,
        "" if lora is None else f" with the LoRA adapter {lora}",
        purpose,
        "on" if decision.extra_buffers else "off",
        decision.reason,
    )
    return construct(
        path,
        extra_buffers=decision.extra_buffers,
        eval_callback=eval_callback,
        adapter=lora,
        sequences=sequences,
        **params,
    )
