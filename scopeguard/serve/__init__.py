"""``scopeguard serve``: the guard as an HTTP service (``pip install 'scopeguard[serve]'``).

>>> from scopeguard.serve import ServeConfig, create_app, run
>>> run(ServeConfig(detector="fast", upstream="http://127.0.0.1:8080/v1"))  # blocks; SIGTERM stops it

Two faces on one warm process (models loaded once):

* the check-only API: ``POST /v1/check``, ``/v1/check/batch``, ``/v1/answer``, ``/v1/preread``,
  ``GET /v1/detectors``, ``/healthz``, ``/readyz``, ``/metrics`` (OpenAPI at ``/docs``);
* an OpenAI-compatible guarded proxy, ``POST /v1/chat/completions`` (see
  :mod:`scopeguard.serve._proxy`).

Safe to expose: loopback by default, a non-loopback address needs an API key (``Authorization:
Bearer``), bounded bodies, documents and queue (413, 422, 429 with ``Retry-After``), a deadline
per request (504, failing closed). :class:`scopeguard.client.GuardClient` talks to it.
"""

from __future__ import annotations

from scopeguard.serve._app import create_app
from scopeguard.serve._config import ServeConfig, load_config
from scopeguard.serve._run import run

__all__ = ["ServeConfig", "create_app", "load_config", "run"]
