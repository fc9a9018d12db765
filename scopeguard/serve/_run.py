"""Run the server on uvicorn until SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import threading
from typing import Any

from scopeguard._optional import require
from scopeguard.serve._app import create_app
from scopeguard.serve._backlog import Backlog
from scopeguard.serve._config import ServeConfig


def uvicorn_server(app: Any, config: ServeConfig, **settings: Any) -> Any:
    """A uvicorn ``Server`` for ``app`` (from :func:`create_app`) on ``config``'s host and port,
    whose unread requests (and the kernel's accept queue) admission counts."""
    uvicorn = require("uvicorn", extra="serve", feature="scopeguard serve")
    server = uvicorn.Server(
        uvicorn.Config(app, host=config.host, port=config.port, log_config=None, access_log=False, **settings)
    )
    runtime = app.runtime

    def listening() -> list[Any]:
        return [s for listener in server.servers for s in listener.sockets]

    runtime.attach(Backlog(server.server_state, listening, active=lambda: runtime.active))
    return server


def run(config: ServeConfig, *, detector: Any = None) -> None:
    """Serve ``config`` until SIGTERM or Ctrl-C. On SIGTERM the server stops accepting, lets the
    requests in flight finish (up to the deadline and 5 s more), then returns (exit code 0)."""
    app = create_app(config, detector=detector)
    server = uvicorn_server(app, config, timeout_graceful_shutdown=int(config.deadline) + 5)
    if threading.current_thread() is threading.main_thread():
        # uvicorn re-raises the signal it stopped on once it is done: a SIGTERM handled in full
        # then ends the process normally (exit 0) instead of killing it
        signal.signal(signal.SIGTERM, lambda *_: None)
    server.run()
