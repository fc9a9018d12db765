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
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scopeguard._optional import require
from scopeguard.errors import ModelError

__all__ = ["check_gguf", "construct", "default_extra_buffers", "load_llama", "supports_extra_buffers"]

logger = logging.getLogger(__name__)

_GGUF_MAGIC = b"GGUF"
_CONSTRUCT_LOCK = threading.Lock()


def _llama_cpp() -> Any:
    return require("llama_cpp", extra="local", feature="llama.cpp models", package="llama-cpp-python")


def _fix(path: Path) -> str:
    from scopeguard.models import reinstall_hint

    return reinstall_hint(path)


def check_gguf(model_path: str | Path) -> Path:
    """``model_path`` as a Path, or a :class:`ModelError` when it is missing or not a GGUF file."""
    path = Path(model_path)
    if not path.is_file():
        raise ModelError(f"GGUF model file not found: {path}. {_fix(path)}")
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise ModelError(f"cannot read the model file {path}: {exc}") from None
    if head != _GGUF_MAGIC:
        raise ModelError(
            f"{path} is not a GGUF file (it starts with {head!r}, not {_GGUF_MAGIC!r}). {_fix(path)}"
        )
    return path


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
def _eval_callback_set(lib: Any, callback: Any) -> Iterator[None]:
    if callback is None:
        yield
        return
    bindings = lib.llama_cpp
    original = bindings.llama_context_default_params

    def default_params() -> Any:
        params = original()
        params.cb_eval = callback
        params.cb_eval_user_data = None
        return params

    bindings.llama_context_default_params = default_params
    try:
        yield
    finally:
        bindings.llama_context_default_params = original


def construct(
    model_path: str | Path, *, extra_buffers: bool, eval_callback: Any = None, **params: Any
) -> Any:
    """``llama_cpp.Llama(model_path, **params)`` with extra buffer types on or off, as given, and
    ``eval_callback`` (a ``ggml_backend_sched_eval_callback``, kept alive by the caller) as the
    context's ``cb_eval``.

    No decision is made here: :func:`load_llama` decides; the canary child calls this directly.
    A load that fails raises :class:`ModelError` naming the file and the fix.
    """
    lib = _llama_cpp()
    path = check_gguf(model_path)
    params.setdefault("verbose", False)
    with _CONSTRUCT_LOCK, _extra_buffers_set(lib, extra_buffers), _eval_callback_set(lib, eval_callback):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                llm = lib.Llama(model_path=str(path), **params)
        except Exception as exc:
            size = path.stat().st_size
            raise ModelError(
                f"llama.cpp could not load {path} ({size:,} bytes): {exc}. The file may be truncated "
                f"or corrupt, or made for a newer llama.cpp. {_fix(path)}"
            ) from None
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


def load_llama(model_path: str | Path, *, purpose: str, eval_callback: Any = None, **params: Any) -> Any:
    """Open ``model_path`` with llama.cpp for ``purpose`` (logged), with the safe parameters.

    ``params`` are ``llama_cpp.Llama`` keyword arguments (``n_ctx``, ``n_threads``, ``embedding``,
    ...). Extra buffer types are used only where :func:`extra_buffers_decision` allows them.
    ``eval_callback``: the context's ``cb_eval`` (see :class:`~scopeguard.llamacpp.LayerTap`).
    """
    from scopeguard.llamacpp._canary import extra_buffers_decision

    path = check_gguf(model_path)
    decision = extra_buffers_decision(path)
    logger.info(
        "loading %s for %s (extra buffers %s: %s)",
        path.name,
        purpose,
        "on" if decision.extra_buffers else "off",
        decision.reason,
    )
    return construct(path, extra_buffers=decision.extra_buffers, eval_callback=eval_callback, **params)
