"""Real servers for a test, re-exported by :mod:`scopeguard.testing`: a llama.cpp server with a
packaged model (:func:`packaged_llama_server`) and ``scopeguard serve`` on uvicorn in a thread
(:func:`running_guard_server`)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError, MissingDependencyError, ModelError
from scopeguard.models import DEFAULT_GGUF

if TYPE_CHECKING:
    from scopeguard.serve import ServeConfig

__all__ = ["packaged_llama_server", "running_guard_server"]


@contextmanager
def packaged_llama_server(
    log_dir: str | os.PathLike[str] | None = None, *, model: str = DEFAULT_GGUF, n_ctx: int = 4096
) -> Iterator[str]:
    """A pytest fixture's server: the packaged ``model`` (:func:`~scopeguard.models.local_gguf`)
    behind :func:`llama_cpp_server`; yields its base URL.

    Skips the calling test (``pytest.skip``, with the reason) when llama-cpp-python's server or
    the model is not installed; a server that then fails to start raises
    :class:`~scopeguard.errors.ModelError` (a failure, not a skip). The server uses
    ``$SCOPEGUARD_N_THREADS`` threads (else 2) and logs to ``log_dir/server.log``.
    """
    import pytest

    from scopeguard.llm import llama_server
    from scopeguard.llm.local import _env_threads
    from scopeguard.models import local_gguf

    try:
        llama_server.require(
            llama_server.SERVER_MODULE,
            extra="local",
            feature="the llama.cpp server",
            package=llama_server.SERVER_PACKAGE,
        )
        path = local_gguf(model)
    except (MissingDependencyError, ModelError) as exc:
        pytest.skip(f"no local llama.cpp server: {exc}")
    log = Path(log_dir) / "server.log" if log_dir is not None else None
    with llama_server.llama_cpp_server(path, n_ctx=n_ctx, n_threads=_env_threads() or 2, log=log) as base_url:
        yield base_url


@contextmanager
def running_guard_server(
    config: ServeConfig | None = None, *, detector: Detector | None = None
) -> Iterator[str]:
    """``scopeguard serve`` for ``config`` (default: the ``lexical`` detector, port 0: a free
    one) on uvicorn in a background thread; yields its base URL (``http://127.0.0.1:PORT``) once
    it accepts connections, and stops it (letting requests in flight finish) on exit.
    ``detector`` replaces the configured one (for example a :class:`ScriptedDetector`)."""
    import time

    from scopeguard.serve import ServeConfig, create_app
    from scopeguard.serve._run import uvicorn_server

    config = config if config is not None else ServeConfig(detector="lexical", port=0)
    server = uvicorn_server(create_app(config, detector=detector), config)
    thread = threading.Thread(target=server.run, name="scopeguard-serve", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise ConfigurationError(f"the guard server did not start on {config.host}:{config.port}")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{config.host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
