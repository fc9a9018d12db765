"""A real OpenAI-compatible server for a GGUF model, on 127.0.0.1, for tests and examples.

>>> from scopeguard.llm.llama_server import llama_cpp_server
>>> with llama_cpp_server(local_gguf("smollm2")) as base_url:   # http://127.0.0.1:PORT/v1
...     llm = from_spec("openai:local", base_url=base_url)

It runs ``python -m llama_cpp.server`` (``pip install 'llama-cpp-python[server]'``) in a child
process, with the model loaded as :func:`scopeguard.llamacpp.server_command` decides (the safe
parameters on a CPU whose fast path is broken), waits until the port accepts connections, and
stops the process when the block ends.
``alias`` is the name the server serves the model under: the packaged reader's own name
(``alias="qwen2.5-coder-1.5b"``) lets ``openai:qwen2.5-coder-1.5b`` read it exactly as the
in-process reader does (:class:`~scopeguard.detection.read.openai.OpenAIVerdicts`); ``args`` pass
any other option of the server (``["--cache", "true"]`` keeps earlier prompts' states in memory).
Point scopeguard's ``openai:`` backend, LangChain's ``ChatOpenAI`` or LlamaIndex's
``OpenAILike`` at the URL it yields (:func:`scopeguard.testing.packaged_llama_server` is the
pytest fixture's body: the packaged model, the test skipped when it is not installed).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from scopeguard._optional import require
from scopeguard.errors import ModelError
from scopeguard.llamacpp import server_command

__all__ = ["llama_cpp_server"]

SERVER_MODULE = "llama_cpp.server"
SERVER_PACKAGE = "llama-cpp-python[server]"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_cpp_server(
    model: str | Path,
    *,
    n_ctx: int = 4096,
    n_threads: int = 2,
    alias: str | None = None,
    args: Sequence[str] = (),
    log: Path | None = None,
    startup_s: float = 120.0,
) -> Iterator[str]:
    """Serve ``model`` (a ``.gguf`` path) with llama-cpp-python's server; yields its base URL.

    ``alias``: the model's name in requests and ``/v1/models`` (default: the file's path);
    ``args``: further options of ``llama_cpp.server``. The server's output goes to ``log`` (else
    it is discarded). A server that exits or does not listen within ``startup_s`` raises
    :class:`~scopeguard.errors.ModelError` (with the end of the log, when there is one).
    """
    require(SERVER_MODULE, extra="local", feature="the llama.cpp server", package=SERVER_PACKAGE)
    port = _free_port()
    options = ["--host", "127.0.0.1", "--port", str(port)]
    options += ["--n_ctx", str(n_ctx), "--n_threads", str(n_threads)]
    if alias is not None:
        options += ["--model_alias", alias]
    command = server_command(model, [*options, "--verbose", "False", *args])
    out = log.open("w") if log is not None else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]
    try:
        _wait_until_listening(proc, port, startup_s, log)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_until_listening(
    proc: subprocess.Popen[bytes], port: int, startup_s: float, log: Path | None
) -> None:
    def tail() -> str:
        return "\n" + log.read_text()[-2000:] if log is not None else ""

    give_up = time.monotonic() + startup_s
    while time.monotonic() < give_up:
        if proc.poll() is not None:
            raise ModelError(f"the llama.cpp server exited early (code {proc.returncode}){tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise ModelError(f"the llama.cpp server did not listen on port {port} within {startup_s:g}s{tail()}")
