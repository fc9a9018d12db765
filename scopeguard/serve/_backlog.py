"""Requests the server holds but has not read yet: the HTTP stack's queue, which admission counts.

A burst of thousands of connections on a small machine waits in two places before the app's
handler sees it: in the kernel's accept queue (Linux reports its length for a listening socket in
``TCP_INFO``), and in uvicorn, as connections accepted and not parsed yet, or parsed and waiting for
the loop to run their task. The event loop's lag does not show either. :class:`Backlog` counts both
and times how fast the loop drains them (seconds of loop per request answered while at least as
many parsed requests were waiting, a moving estimate), so that admission can count
``waiting x that pace`` as time a request admitted now will wait behind. A connection opened and
left silent (a client's pre-opened connection, or a slow attack) counts only until it has gone
:data:`SILENT_AFTER` seconds without a request: the loop reads every connection that has data at
each turn, so by then it is known to be silent, and silent connections never turn requests away for
long (nor set the pace). Where the server is not uvicorn, or the platform reports no queue, it
counts what it can (nothing, at worst).
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Backlog", "accept_queue"]

logger = logging.getLogger(__name__)

_TCP_INFO = getattr(socket, "TCP_INFO", None)  # Linux only
_UNACKED = 24  # offset of struct tcp_info's tcpi_unacked: a listening socket's accept-queue length
SILENT_AFTER = 1.0  # seconds a connection may go without a request before it counts as silent
_DRIFT = 0.05  # per sample without a measurement, of the way back to the prior pace (~1 s half-life)


def accept_queue(sock: Any) -> int:
    """Connections waiting in listening socket ``sock``'s accept queue (0 where the platform does
    not say)."""
    if _TCP_INFO is None:
        return 0
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 104)
        return int(struct.unpack_from("I", info, _UNACKED)[0]) if len(info) >= _UNACKED + 4 else 0
    except (OSError, ValueError, struct.error):
        return 0


def _settled(connection: Any) -> bool:
    """Whether a uvicorn connection has no request waiting: idle between requests (kept alive).
    One answered and closing still counts until it is gone: soon, and counting it errs towards
    refusing, where not counting one gone since the sample would err towards admitting."""
    return getattr(connection, "timeout_keep_alive_task", None) is not None


def _unparsed(connection: Any) -> bool:
    """Whether a uvicorn connection has no request yet and is not idle after one."""
    return getattr(connection, "cycle", None) is None and not _settled(connection)


class Backlog:
    """A uvicorn server's unread requests and how fast its loop drains them.

    Args:
        state: uvicorn's ``Server.server_state`` (``connections``; ``tasks``: a task per parsed
            request until it ends; ``total_requests``: requests answered).
        sockets: the listening sockets, asked at each :meth:`sample` (uvicorn binds them at start).
        active: the number of requests inside the app now (the server's middleware counts them).
        prior: seconds of loop per request before any drain has been measured.
        alpha: the weight of each new measurement in the moving estimate.
    """

    def __init__(
        self,
        state: Any,
        sockets: Callable[[], Iterable[Any]] = tuple,
        *,
        active: Callable[[], int] = lambda: 0,
        prior: float = 0.001,
        alpha: float = 0.2,
    ) -> None:
        self.state = state
        self.sockets = sockets
        self.prior = self.per_request = prior
        self.alpha = alpha
        self.active = active
        self.waiting = 0
        self._listeners: list[Any] = []
        self._settled = 0
        self._unparsed: dict[int, float] = {}  # connection without a request: since when
        self._parsed = 0  # parsed requests not yet in the app, at the last count
        self._warned = False
        self._answered: int | None = None
        self._at = 0.0

    def count(self) -> int:
        """Requests waiting now: connections uvicorn holds that are not settled (idle between
        requests, or silent: without a request for :data:`SILENT_AFTER` s; counted at the last
        :meth:`sample`, so that a count costs the same for any number of connections) and not
        inside the app (:attr:`active`), plus connections in the accept queues. A connection
        accepted and not yet parsed counts: in a burst that is most of them. Approximate: a request
        whose client has gone is still inside the app but has no connection, so it hides one
        unread connection until it ends."""
        active = self.active()
        held = len(getattr(self.state, "connections", ())) - self._settled - active
        parsed = len(getattr(self.state, "tasks", ())) - active
        self._parsed = max(0, parsed)
        self.waiting = max(0, held, parsed) + sum(accept_queue(s) for s in self._listeners)
        return self.waiting

    def seconds(self) -> tuple[float, float]:
        """The loop work waiting now, all of it and the part on parsed requests: :meth:`count` x
        the loop's time per request ((0, 0) if the server's state cannot be read: admission then
        goes on without it, never failing a request)."""
        try:
            waiting = self.count()
            return waiting * self.per_request, self._parsed * self.per_request
        except Exception:  # a uvicorn whose internals moved: admit on the other terms
            if not self._warned:
                self._warned = True
                logger.warning("cannot count the server's unread requests; admission leaves them out")
            return 0.0, 0.0

    def sample(self, now: float) -> float:
        """At ``now`` (loop time): update the pace from the requests answered since the last
        sample, if at least as many parsed requests were waiting then (the loop never ran short of
        work), and count again; the seconds of loop work waiting."""
        answered = int(getattr(self.state, "total_requests", 0))
        drained = 0 if self._answered is None else answered - self._answered
        if 0 < drained <= self._parsed:  # parsed requests, not connections that may be silent
            per = (now - self._at) / drained
            self.per_request += self.alpha * (per - self.per_request)
        else:  # unmeasured, it drifts back to the prior: one stall is not the pace for good
            self.per_request += _DRIFT * (self.prior - self.per_request)
        self._answered, self._at = answered, now
        try:
            self._listeners = list(self.sockets())
            connections = list(getattr(self.state, "connections", ()))
            # a connection without a request for SILENT_AFTER seconds has sent none: the loop reads
            # every connection with data each turn, so it is silent, not unread (a burst's client,
            # busy opening its other connections, may take most of a second to write on one)
            seen = self._unparsed
            self._unparsed = {id(c): seen.get(id(c), now) for c in connections if _unparsed(c)}
            silent = sum(now - since >= SILENT_AFTER for since in self._unparsed.values())
            self._settled = sum(1 for c in connections if _settled(c)) + silent
        except Exception:  # as in seconds(): never stop the loop's watcher
            self._listeners, self._settled, self._unparsed = [], 0, {}
        return self.seconds()[0]
