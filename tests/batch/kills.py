"""A kill at a chosen phase of a batch job, for the kill-and-resume tests of every batch-mode job."""

from __future__ import annotations

from typing import Any

import pytest

from scopeguard.batch import BatchJobs

__all__ = ["Kill", "kill_at"]


class Kill(BaseException):
    """Stands for a SIGKILL: nothing after it runs (not an Exception, so nothing handles it)."""


def kill_at(monkeypatch: pytest.MonkeyPatch, phase: str, job: str = "job-00002") -> None:
    """Raise :class:`Kill` once, right after ``job``'s state is recorded with status ``phase``
    (the second job by default: the first shows a resume after merged waves)."""
    save = BatchJobs.save
    kills = {"left": 1}

    def save_then_die(self: BatchJobs, state: Any) -> None:
        save(self, state)
        if state.status == phase and state.name == job and kills["left"]:
            kills["left"] -= 1
            raise Kill

    monkeypatch.setattr(BatchJobs, "save", save_then_die)
