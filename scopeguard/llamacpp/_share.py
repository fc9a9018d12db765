"""Reading threads sized to the cores other processes leave free.

llama.cpp's CPU threads meet at a barrier after every operation of the graph and wait there by
spinning. When another busy process holds one of the cores, a thread of ours waits for the kernel
to run it again while its partner spins, and a read that takes 0.5 s alone takes many times as long.
One thread per free core avoids that: :func:`threads_for` caps a read's threads at the cores that
the other processes on the machine left idle over the last second (never fewer than one), and
:func:`decode <scopeguard.llamacpp.decode>` sets them on the context before each read.

A daemon thread samples ``/proc/stat`` (the machine's busy time) and ``/proc/self/stat`` (this
process's) every :data:`INTERVAL` seconds; the cores the others use are the difference, smoothed.
Where ``/proc`` is missing (not Linux) the threads stay as configured. ``SCOPEGUARD_CPU_SHARE=off``
turns the sharing off (the threads stay as configured everywhere).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

__all__ = ["CPU_SHARE_ENV", "CoreShare", "core_share", "threads_for"]

logger = logging.getLogger(__name__)

CPU_SHARE_ENV = "SCOPEGUARD_CPU_SHARE"
INTERVAL = 0.25  # seconds between samples
SMOOTHING = 0.5  # weight of the newest sample in the running estimate
#: cores another process must keep busy before one of ours is given up (below it, a core is free)
BUSY_CORE = 0.6


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _machine_busy_ticks(stat: Path) -> int:
    """Busy clock ticks of all cores (user, nice, system, irq, softirq, steal) since boot."""
    fields = stat.read_text(encoding="ascii").split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return user + nice + system + irq + softirq + steal


def _own_ticks(own: Path) -> int:
    """Clock ticks this process has run (user and system) since it started."""
    fields = own.read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


class CoreShare:
    """A running estimate of the cores that other processes keep busy."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.cores = _available_cores()
        self._stat, self._own = proc / "stat", proc / "self" / "stat"
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._others = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def others(self) -> float:
        """Cores the other processes kept busy, smoothed over the last second or so."""
        return self._others

    def sample(self, seconds: float) -> float:
        """Measure the others' busy cores over ``seconds`` (blocking) and fold it into the estimate."""
        before = (_machine_busy_ticks(self._stat), _own_ticks(self._own), time.monotonic())
        time.sleep(seconds)
        return self._fold(before)

    def _fold(self, before: tuple[int, int, float]) -> float:
        busy, own, now = _machine_busy_ticks(self._stat), _own_ticks(self._own), time.monotonic()
        elapsed = max(now - before[2], 1e-3)
        others = max(0.0, ((busy - before[0]) - (own - before[1])) / self._hz / elapsed)
        with self._lock:
            self._others = SMOOTHING * min(others, float(self.cores)) + (1 - SMOOTHING) * self._others
        return self._others

    def start(self) -> bool:
        """Start sampling in a daemon thread (once); False where ``/proc`` cannot be read."""
        with self._lock:
            if self._thread is not None:
                return True
            try:
                _machine_busy_ticks(self._stat), _own_ticks(self._own)
            except (OSError, ValueError, IndexError):
                logger.debug("no /proc/stat here: reading threads stay as configured")
                return False
            self._thread = threading.Thread(target=self._run, name="scopeguard-core-share", daemon=True)
            self._thread.start()
            return True

    def _run(self) -> None:
        while True:
            try:
                self.sample(INTERVAL)
            except (OSError, ValueError, IndexError):  # /proc went away: keep the last estimate
                return

    def threads(self, limit: int) -> int:
        """At most ``limit`` threads, one per core the others leave free, never fewer than one."""
        busy = int(self._others + (1.0 - BUSY_CORE)) if self._others >= BUSY_CORE else 0
        return max(1, min(limit, self.cores - busy))


_SHARE: CoreShare | None = None
_SHARE_LOCK = threading.Lock()


def core_share() -> CoreShare | None:
    """The process's sampler, started on first use; None when sharing is off or cannot run here."""
    global _SHARE
    if os.environ.get(CPU_SHARE_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return None
    with _SHARE_LOCK:
        if _SHARE is None:
            share = CoreShare()
            if not share.start():
                return None
            _SHARE = share
    return _SHARE


def threads_for(limit: int) -> int:
    """The threads a read should use now: ``limit`` capped at the cores the others leave free."""
    share = core_share()
    return limit if share is None else share.threads(limit)
