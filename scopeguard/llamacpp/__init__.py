"""One loader for every llama.cpp model scopeguard opens, safe on every CPU it installs on.

>>> from scopeguard.llamacpp import load_llama, extra_buffers_decision
>>> llm = load_llama(path, purpose="log-prob verdicts", n_ctx=4096)
>>> extra_buffers_decision(path).reason
'the canary passed (...)'

:func:`load_llama` checks the file, decides whether llama.cpp's extra buffer types (weight
repacking, AMX) are safe here with a one-time canary in a child process (see
:func:`extra_buffers_decision`), and constructs the model. :func:`server_command` is the same
for ``llama_cpp.server`` in a child process. :class:`LayerTap` reads chosen layers' hidden
states from a decode that computes the logits anyway (llama.cpp's eval callback). :func:`decode`
and :func:`logits_row` read tokens into a context and copy logits out, for the readers.
``SCOPEGUARD_LLAMA_EXTRA_BUFFERS=on|off`` forces either way; ``scopeguard doctor`` shows the decision and why.
:func:`cpu_name`, :func:`cpu_features` and :func:`llama_cpp_build` name what that decision depends on;
:func:`supports_sequences` says whether these bindings can join kept states (set reads).
Each read runs on the cores other processes leave free (:func:`threads_for`, ``SCOPEGUARD_CPU_SHARE=off``
to keep every configured thread).
"""

from scopeguard.llamacpp._canary import (
    ENV_VAR,
    CanaryResult,
    LoaderDecision,
    extra_buffers_decision,
    run_canary,
)
from scopeguard.llamacpp._decode import decode, logits_row
from scopeguard.llamacpp._layers import LayerTap, resolve_layers
from scopeguard.llamacpp._loader import check_gguf, load_llama, set_adapter, supports_sequences
from scopeguard.llamacpp._server import server_command
from scopeguard.llamacpp._share import CPU_SHARE_ENV, CoreShare, threads_for
from scopeguard.llamacpp._speed import ReadSpeed, measure_read_speed
from scopeguard.llamacpp._system import cpu_features, cpu_name, llama_cpp_build

__all__ = [
    "CPU_SHARE_ENV",
    "ENV_VAR",
    "CanaryResult",
    "CoreShare",
    "LayerTap",
    "LoaderDecision",
    "ReadSpeed",
    "check_gguf",
    "cpu_features",
    "cpu_name",
    "decode",
    "extra_buffers_decision",
    "llama_cpp_build",
    "load_llama",
    "logits_row",
    "measure_read_speed",
    "resolve_layers",
    "run_canary",
    "server_command",
    "set_adapter",
    "supports_sequences",
    "threads_for",
]
