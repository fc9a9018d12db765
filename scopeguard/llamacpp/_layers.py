"""Hidden states of chosen layers, taken from a llama.cpp decode that computes the logits anyway.

llama.cpp calls a context's *eval callback* (``cb_eval``, public in ``llama.h``) for every tensor
of the graph it is about to compute; answering "yes" for a tensor makes it stop there and hand the
tensor over. :class:`LayerTap` asks for the blocks' outputs (``l_out-<i>``, the name every
llama.cpp model builder gives a layer's output) and the final normed state (``result_norm``), and
copies the last row of each, the last token's, through ``ggml_backend_tensor_get`` (so the tensor
may live on any backend, a GPU's included). The tap is off unless a read turns it on, and then
costs a callback per graph node (measured: no difference in decode time for the 1.5B model).

Layers are numbered like transformers' ``hidden_states``: ``0`` is the token embeddings (not
available here), ``i`` in ``1..n_layer-1`` the output of block ``i`` (``l_out-<i-1>``), ``n_layer``
the final normed state, and ``-k`` counts from the top (``-1`` = ``n_layer``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.errors import ConfigurationError, ModelError

__all__ = ["LayerTap", "resolve_layers"]

_FINAL = "result_norm"


def resolve_layers(layers: Sequence[int], n_layer: int) -> tuple[int, ...]:
    """``layers`` as positive indexes in ``1..n_layer`` (negative ones count from the top)."""
    out: list[int] = []
    for layer in layers:
        idx = n_layer + 1 + layer if layer < 0 else layer
        if not 1 <= idx <= n_layer:
            raise ConfigurationError(
                f"layer {layer} is outside the model's 1..{n_layer} (or -{n_layer}..-1); "
                "layer 0, the token embeddings, is not read"
            )
        if idx not in out:
            out.append(idx)
    return tuple(out)


def _tensor_name(layer: int, n_layer: int) -> str:
    return _FINAL if layer == n_layer else f"l_out-{layer - 1}"


def _ggml(lib: Any) -> Any:
    """ctypes bindings of the four ggml functions the tap calls, from llama-cpp-python's own lib."""
    folder = Path(os.path.dirname(lib.__file__)) / "lib"
    candidates = sorted(folder.glob("libggml-base.*")) + sorted(folder.glob("ggml-base.*"))
    for path in candidates:
        try:
            g = ctypes.CDLL(str(path))
            g.ggml_get_name.restype = ctypes.c_char_p
            g.ggml_get_name.argtypes = [ctypes.c_void_p]
            g.ggml_nbytes.restype = ctypes.c_size_t
            g.ggml_nbytes.argtypes = [ctypes.c_void_p]
            g.ggml_nrows.restype = ctypes.c_int64
            g.ggml_nrows.argtypes = [ctypes.c_void_p]
            g.ggml_backend_tensor_get.restype = None
            g.ggml_backend_tensor_get.argtypes = [
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_size_t,
            ]
            return g
        except (OSError, AttributeError):
            continue
    raise ModelError(
        f"llama-cpp-python {lib.__version__} ships no ggml library in {folder}: hidden states cannot be "
        "read with it; use layers=() (log-probs only) or the transformers backend"
    )


class LayerTap:
    """The eval callback that copies the last token's state at ``layers`` (see the module docstring).

    Pass :attr:`callback` as the context's ``cb_eval`` (``load_llama(..., eval_callback=tap.callback)``),
    then call :meth:`bind` with the loaded model's layer count. Reads happen with the owner's lock held.
    """

    def __init__(self, lib: Any, layers: Sequence[int]) -> None:
        self._requested = tuple(int(x) for x in layers)
        self._g = _ggml(lib)
        self.layers: tuple[int, ...] = ()
        self.n_embd = 0
        self._names: dict[bytes, int] = {}
        self._rows: dict[int, np.ndarray] = {}
        self._on = False
        self._error: str | None = None
        self.callback = lib.llama_cpp.ggml_backend_sched_eval_callback(self._eval)

    def bind(self, n_layer: int, n_embd: int) -> None:
        """Resolve the requested layers against the loaded model."""
        self.layers = resolve_layers(self._requested, n_layer)
        self.n_embd = n_embd
        self._names = {_tensor_name(i, n_layer).encode(): i for i in self.layers}

    def _eval(self, tensor: int, ask: bool, _user_data: Any) -> bool:
        if not self._on:
            return False
        try:
            name = self._g.ggml_get_name(tensor)
            layer = self._names.get(name) if name is not None else None
            if layer is None:
                return False
            if ask:
                return True
            nbytes = int(self._g.ggml_nbytes(tensor))
            nrows = int(self._g.ggml_nrows(tensor))
            if nbytes == 0 or nrows == 0:  # a micro-batch with no output rows (the final state)
                return True
            row = nbytes // nrows
            if row != 4 * self.n_embd:
                self._error = f"{name.decode()} has rows of {row} bytes, not {self.n_embd} float32 values"
                return True
            buf = (ctypes.c_float * self.n_embd)()
            self._g.ggml_backend_tensor_get(tensor, buf, nbytes - row, row)
            self._rows[layer] = np.ctypeslib.as_array(buf).astype(np.float32, copy=True)
        except Exception as exc:  # never let an exception unwind through llama.cpp's C frames
            self._error = f"{type(exc).__name__}: {exc}"
        return True

    def start(self) -> None:
        """Capture during the next decodes (the last decode's rows win)."""
        self._rows = {}
        self._error = None
        self._on = True

    def abort(self) -> None:
        """Stop capturing and drop what was captured."""
        self._on = False
        self._rows = {}

    def stop(self) -> np.ndarray:
        """Stop capturing; the states as a ``(len(layers), n_embd)`` float32 array."""
        self._on = False
        if self._error is not None:
            raise ModelError(f"reading hidden states failed: {self._error}")
        missing = [i for i in self.layers if i not in self._rows]
        if missing:
            raise ModelError(
                f"llama.cpp computed no tensor for layers {missing} (looked for "
                f"{[k.decode() for k, v in self._names.items() if v in missing]}): this model's graph "
                "names its layers differently; use the transformers backend for its hidden states"
            )
        return np.stack([self._rows[i] for i in self.layers])
