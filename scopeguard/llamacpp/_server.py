"""``llama_cpp.server`` in a child process, with the loader's decision on extra buffer types.

:func:`server_command` decides in the parent (the canary runs there, once) and returns the
command line; the child, ``python -m scopeguard.llamacpp._server --extra-buffers on|off ARGS``,
applies it before ``llama_cpp.server`` builds its model, then runs the server with ``ARGS``.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from scopeguard.llamacpp._loader import check_gguf, default_extra_buffers

__all__ = ["server_command"]


def server_command(model_path: str | Path, args: Sequence[str] = ()) -> list[str]:
    """The command that serves ``model_path`` with llama-cpp-python's OpenAI-compatible server
    (``args``: the server's own options, ``--port`` and so on), loaded with the safe parameters."""
    from scopeguard.llamacpp._canary import extra_buffers_decision

    path = check_gguf(model_path)
    decision = extra_buffers_decision(path)
    flag = "on" if decision.extra_buffers else "off"
    module = "scopeguard.llamacpp._server"
    return [sys.executable, "-m", module, "--extra-buffers", flag, "--model", str(path), *args]


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--extra-buffers" or argv[1] not in ("on", "off"):
        sys.exit("usage: python -m scopeguard.llamacpp._server --extra-buffers on|off SERVER-ARGS...")
    default_extra_buffers(argv[1] == "on")
    print(f"scopeguard: llama.cpp extra buffers {argv[1]}", file=sys.stderr, flush=True)
    sys.argv = ["llama_cpp.server", *argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
