"""Deadline-aware admission: a request is let in while it can be answered within its deadline.

The server keeps, per kind of work (``new``: documents it has not read yet; ``known``: documents it
has; ``preread``), a moving estimate (exponentially weighted) of the server time one request costs:
a finished request's time in the server divided by the number of requests that were in it when it
was admitted (itself included): the work it waited behind. So the estimate counts what the workers
and the reading lane do side by side, a burst is not charged to its first request alone, and the
requests that arrive after one (and wait behind it) do not make it look cheaper. A request arriving when
``pending`` seconds of admitted work are ahead of it is expected to finish after
``pending + cost(kind)``; it is admitted when that fits inside ``headroom * deadline``, and turned
away at once otherwise, with a ``Retry-After`` of the seconds by which it would overrun (never after
making the client wait).
A request also waits before the server's handler sees it, for the event loop to read it. The server
measures the loop's lag (how late a timer set for a known moment wakes: a loop held up by slow
handlers or by threads holding the GIL) and counts it as time already spent: ``lag + pending +
cost(kind)``. When the lag alone is past the line, every request is turned away until the loop has
caught up, which costs it little (a 429 is sent before the body is read). Requests that have
arrived but that the HTTP stack has not read yet (in the kernel's accept queue, or accepted by
uvicorn and not parsed: a burst of thousands on a small machine waits there) do not show in the lag:
under uvicorn the server counts them and times how fast its loop drains them
(:mod:`scopeguard.serve._backlog`), and counts that ``backlog`` (their number x the loop's time
per request) as time already spent too: ``lag + backlog + pending + cost(kind)``. A lone request
is refused only for the lag and the requests already parsed, never for connections that have sent
nothing yet (a slow attack could hold those).
``queue_size`` stays as the last guard: at most that many requests (and their bodies) are held at
once, whatever the estimate.

Before a kind has been measured, its first requests are admitted on the prior (the warm-up check's
time, or nothing); each completion corrects it. A request may count as several ``units`` of its
kind (a batch's items; the server counts a request's new documents in warm-up documents' worth of
text), and its estimate is per unit.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Admission", "Rejected", "Ticket"]

KINDS = ("new", "known", "preread")


class Rejected(Exception):
    """A request turned away: ``reason`` (``deadline`` or ``queue_full``) and the seconds to wait."""

    def __init__(self, reason: str, retry_after: int, message: str) -> None:
        self.reason = reason
        self.retry_after = retry_after
        super().__init__(message)

    @property
    def error_type(self) -> str:
        """The ``type`` of the 429's error body."""
        return "queue_full" if self.reason == "queue_full" else "over_deadline"


@dataclass
class Ticket:
    """One admitted request: its kind, the work it was expected to cost (``units`` requests'
    worth), when it was admitted and how many requests were in flight then (itself included)."""

    kind: str
    units: int
    cost: float
    admitted: float
    sharing: int


class Admission:
    """The admission rule (see the module docstring).

    Args:
        deadline: seconds a request may take (``None``: only ``queue_size`` limits).
        queue_size: the most requests held at once.
        headroom: the share of the deadline an admitted request's expected finish may use.
        alpha: the weight of each new measurement in the moving estimates.
    """

    def __init__(
        self, deadline: float | None, queue_size: int, *, headroom: float = 0.8, alpha: float = 0.2
    ) -> None:
        self.deadline = deadline
        self.queue_size = queue_size
        self.headroom = headroom
        self.alpha = alpha
        self.cost: dict[str, float] = {}
        self.in_flight = 0
        self.pending = 0.0
        self.lag = 0.0  # seconds a request waits before its handler runs (the event loop's lag)
        self.backlog = 0.0  # seconds of loop work on requests that arrived and are not read yet
        self.parsed = 0.0  # the part of it on requests parsed (not connections that may be silent)
        # counts both again at each decision: (backlog, parsed)
        self.unread: Callable[[], tuple[float, float]] | None = None
        self._lock = threading.Lock()

    def seed(self, kind: str, seconds: float) -> None:
        """A prior for ``kind`` (e.g. the warm-up check's time), replaced by measurements."""
        with self._lock:
            self.cost.setdefault(kind, max(seconds, 0.0))

    def estimate(self, kind: str) -> float:
        """The current estimate of one request of ``kind`` (an unmeasured kind borrows the
        highest estimate known, or 0)."""
        if kind in self.cost:
            return self.cost[kind]
        return max(self.cost.values(), default=0.0)

    def _finish(self, cost: float) -> float:
        """When a request costing ``cost`` and arriving now is expected to finish: the loop's lag, its
        unread requests and the work admitted before it come first."""
        return self.lag + self.backlog + self.pending + cost

    def expected_finish(self, kind: str, units: int = 1) -> float:
        """Seconds a request of ``kind`` arriving now is expected to take."""
        return self._finish(units * self.estimate(kind))

    def _refusal(self, cost: float) -> Rejected | None:
        """Why a request costing ``cost`` would be turned away now (``None``: it would not be)."""
        if self.unread is not None:
            self.backlog, self.parsed = self.unread()
        if self.in_flight >= self.queue_size:
            return Rejected(
                "queue_full",
                max(1, math.ceil(cost)),
                f"the server is busy ({self.queue_size} requests in flight)",
            )
        finish = self._finish(cost)
        line = None if self.deadline is None else self.headroom * self.deadline
        # a lone request runs whatever it costs, unless the server is already behind by the line
        # connections that have sent nothing yet may never (a slow attack): alone, a request is
        # refused for the loop's lag and parsed requests only
        behind = self.lag + self.parsed
        if line is not None and finish > line and (self.in_flight or behind > line):
            over = finish - line
            return Rejected(
                "deadline",
                max(1, math.ceil(over)),
                f"the server is busy: a request now would take about {finish:.1f}s, past "
                f"{self.headroom:g} of the deadline of {self.deadline:g}s",
            )
        return None

    def precheck(self) -> Rejected | None:
        """Whether even the cheapest request would be turned away now: asked before a request's
        body is read, so that a burst is refused for the price of its headers."""
        with self._lock:
            return self._refusal(min(self.cost.values(), default=0.0))

    def admit(self, kind: str, units: int = 1) -> Ticket:
        """A ticket for a request of ``kind`` (``units``: items it holds, e.g. a batch), or
        :class:`Rejected`."""
        with self._lock:
            cost = units * self.estimate(kind)
            refused = self._refusal(cost)
            if refused is not None:
                raise refused
            self.in_flight += 1
            self.pending += cost
            return Ticket(kind, units, cost, time.monotonic(), self.in_flight)

    def done(self, ticket: Ticket) -> None:
        """The request of ``ticket`` finished: its work leaves the queue, and its time in the
        server over the requests it found there corrects its kind's estimate."""
        now = time.monotonic()
        with self._lock:
            sharing = ticket.sharing
            self.in_flight -= 1
            self.pending = max(0.0, self.pending - ticket.cost) if self.in_flight else 0.0
            per_unit = (now - ticket.admitted) / max(sharing, 1.0) / max(ticket.units, 1)
            old = self.cost.get(ticket.kind)
            self.cost[ticket.kind] = per_unit if old is None else old + self.alpha * (per_unit - old)
