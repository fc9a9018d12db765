"""The start-up pre-read (``scopeguard serve --preread CORPUS``): the corpus read in the background.

The server answers from the start; once its models are loaded, a :class:`~scopeguard.PrereadJob`
reads the corpus's documents one at a time through the runtime's ``preread`` (the reading queue,
and the server's record of what it has pre-read), each only while no check is running. ``/readyz``
(:meth:`StartupPreread.status`) and ``/metrics`` (``scopeguard_preread_documents``,
``scopeguard_preread_running``) say how far it got; once it has read every document, its
:class:`~scopeguard.PrereadReport` summary is logged and ``/readyz`` adds its ``seconds`` and
``bytes_on_disk``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scopeguard._prereading import CheckGate, PrereadJob
from scopeguard.errors import ScopeGuardError
from scopeguard.serve._metrics import Metrics
from scopeguard.types import Document

logger = logging.getLogger(__name__)


class StartupPreread:
    """The pre-read of ``corpus`` (``None``: none) and its progress in ``metrics``."""

    def __init__(self, corpus: Path | None, metrics: Metrics) -> None:
        self.corpus = corpus
        self.metrics = metrics
        self.job: PrereadJob | None = None
        self.error: str | None = None  # why the corpus could not be loaded
        if corpus is not None:
            metrics.preread_running.set_function(lambda: float(self.running))

    @property
    def running(self) -> bool:
        """Whether the pre-read is still to come or under way."""
        return self.corpus is not None and self.error is None and not (self.job and self.job.done())

    def start(
        self,
        read: Callable[[Document], int],
        gate: CheckGate,
        *,
        disk_bytes: Callable[[], int] | None = None,
    ) -> None:
        """Load the corpus and start reading it with ``read`` (one document; the passages read),
        yielding to the checks counted by ``gate``, ``disk_bytes()`` measuring the state folder
        before and after; a corpus that cannot be loaded is logged and reported by :meth:`status`."""
        if self.corpus is None or self.job is not None:
            return
        from scopeguard.generation.corpus import corpus_passages

        try:
            documents = corpus_passages(self.corpus)
        except ScopeGuardError as exc:
            self.error = str(exc)
            logger.error("the corpus to pre-read could not be loaded: %s", exc)
            return
        job = PrereadJob(read, documents, gate=gate, disk_bytes=disk_bytes)
        self.metrics.preread.labels("total").set(job.total)
        self.metrics.preread.labels("read").set_function(lambda: float(job.read))
        self.job = job
        logger.info("pre-reading %d documents of %s in the background", job.total, self.corpus)

    def status(self) -> dict[str, Any] | None:
        """The corpus, its documents, those read so far, the passages read, whether the pre-read
        has ended, and what stopped it early (``None`` without a corpus); once every document is
        read, also its wall time (``seconds``) and the bytes its states added on disk
        (``bytes_on_disk``)."""
        if self.corpus is None:
            return None
        job = self.job
        error = self.error
        if job is not None and job.error is not None:
            error = f"{type(job.error).__name__}: {job.error}"
        status: dict[str, Any] = {
            "corpus": str(self.corpus),
            "documents": job.total if job else 0,
            "read": job.read if job else 0,
            "passages": job.passages if job else 0,
            "done": not self.running,
            "error": error,
        }
        report = job.report if job else None
        if report is not None:
            status.update(seconds=report.seconds, bytes_on_disk=report.bytes_on_disk)
        return status

    def cancel(self) -> None:
        """Stop the pre-read before its next document (the server is closing)."""
        if self.job is not None:
            self.job.cancel()
