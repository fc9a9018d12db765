"""Prometheus metrics of one server (a registry of its own, so two apps in a process never clash)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from scopeguard._optional import require
from scopeguard._speculation import DiscardedCost
from scopeguard.errors import ScopeGuardError
from scopeguard.types import Verdict

logger = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    """The server's counters, histograms and gauges (listed in docs/guides/serve.md)."""

    def __init__(self) -> None:
        prom = require("prometheus_client", extra="serve", feature="scopeguard serve's metrics")
        self._prom = prom
        self.registry = prom.CollectorRegistry()
        m = self._metric
        self.requests = m(
            "Counter", "scopeguard_requests", "HTTP requests by route and status.", "route", "status"
        )
        self.request_seconds = m(
            "Histogram", "scopeguard_request_seconds", "Request latency by route.", "route"
        )
        self.verdicts = m(
            "Counter", "scopeguard_verdicts", "Verdicts by label and deciding stage.", "label", "stage"
        )
        self.check_seconds = m(
            "Histogram",
            "scopeguard_check_seconds",
            "Check latency per detector (the detector's own timing).",
            "detector",
        )
        self.fail_closed = m(
            "Counter", "scopeguard_fail_closed", "Requests refused because a step failed (reason).", "reason"
        )
        self.rejected = m(
            "Counter", "scopeguard_rejected", "Requests turned away before running (reason).", "reason"
        )
        self.streams_cut = m(
            "Counter",
            "scopeguard_streams_cut",
            "Streamed replies ended early by a limit (reason: idle, deadline) or an upstream failure.",
            "reason",
        )
        self.in_flight = m("Gauge", "scopeguard_queue_depth", "Requests admitted and not done.")
        self.admission_estimate = m(
            "Gauge",
            "scopeguard_admission_estimate_seconds",
            "Server time one request is expected to cost (kind: new, known or preread documents).",
            "kind",
        )
        self.loop_lag = m(
            "Gauge",
            "scopeguard_event_loop_lag_seconds",
            "How late the server's event loop ran a timer (time a new request waits to be read).",
        )
        self.unread = m(
            "Gauge",
            "scopeguard_unread_requests",
            "Requests that arrived and the HTTP stack has not read yet (accept queue and unparsed).",
        )
        self.reading_queue = m(
            "Gauge", "scopeguard_reading_queue_depth", "Calls waiting for or holding the reading model."
        )
        self.hedged = m(
            "Counter",
            "scopeguard_hedged",
            "In-scope verdicts in the calibration profile's hedge band (to answer with a caveat).",
        )
        self.calibration = m(
            "Gauge",
            "scopeguard_calibration_threshold",
            "The calibration profile's threshold on P(out of scope), by its detector and false-refusal "
            "budget (absent without a profile).",
            "detector",
            "budget",
        )
        self.preread = m(
            "Gauge",
            "scopeguard_preread_documents",
            "The start-up pre-read (--preread): the corpus's documents (state=total) and those read so far "
            "(state=read); absent without --preread.",
            "state",
        )
        self.preread_running = m(
            "Gauge",
            "scopeguard_preread_running",
            "1 while the start-up pre-read (--preread) is to come or under way, 0 once it ended (or none).",
        )
        self.upstream_seconds = m(
            "Histogram",
            "scopeguard_upstream_seconds",
            "Upstream LLM latency (to the first byte when streaming).",
        )

        self.speculative = m(
            "Counter",
            "scopeguard_speculative_answers",
            "Answers started beside the check (--speculative), by route and outcome (released, discarded).",
            "route",
            "outcome",
        )
        self.discarded_tokens = m(
            "Counter",
            "scopeguard_speculative_discarded_tokens",
            "Tokens of speculative answers dropped by their verdict (counted: the LLM's own count, tokens; "
            "else the chunks received, chunks).",
            "counted",
        )
        self.discarded_seconds = m(
            "Counter",
            "scopeguard_speculative_discarded_seconds",
            "Seconds speculative answers dropped by their verdict ran (until dropped, or their end).",
        )

    def _metric(self, kind: str, name: str, doc: str, *labels: str) -> Any:
        """A ``prometheus_client`` metric of ``kind`` (``Counter``, ``Gauge``, ``Histogram``: with the
        latency buckets) in this server's registry, with the label names ``labels``."""
        buckets = {"buckets": _LATENCY_BUCKETS} if kind == "Histogram" else {}
        return getattr(self._prom, kind)(name, doc, labels, registry=self.registry, **buckets)

    def speculation(self, route: str, cost: DiscardedCost | None) -> None:
        """Count one speculative answer of ``route``: released (``cost`` ``None``) or discarded."""
        self.speculative.labels(route, "released" if cost is None else "discarded").inc()
        if cost is not None:
            self.discarded_tokens.labels(cost.counted).inc(cost.tokens)
            self.discarded_seconds.inc(cost.seconds)

    def watch_states(self, stats: Callable[[], Any]) -> None:
        """Report the reader's kept states at each scrape: ``stats()`` gives its
        :class:`~scopeguard.detection.read.llama_states.KeptStateStats` (``None``: it keeps none,
        and the metrics are absent)."""
        self.registry.register(_KeptStates(self._prom, stats))

    def verdict(self, verdict: Verdict) -> None:
        self.verdicts.labels(verdict.label, verdict.stage or verdict.detector or "-").inc()
        self.check_seconds.labels(verdict.detector or "-").observe(verdict.latency_ms / 1000.0)
        if verdict.hedge:
            self.hedged.inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        body: Any = self._prom.generate_latest(self.registry)
        return body, str(self._prom.CONTENT_TYPE_LATEST)


class _KeptStates:
    """The kept-state metrics, read from the reader when scraped (a custom collector)."""

    def __init__(self, prom: Any, stats: Callable[[], Any]) -> None:
        self._core = prom.metrics_core  # the metric families a collector yields
        self._stats = stats

    def collect(self) -> Iterator[Any]:
        try:
            stats = self._stats()
        except (ScopeGuardError, OSError) as exc:  # never a failed scrape
            logger.warning("could not read the kept states' figures: %s", exc)
            return
        if stats is None:
            return
        saved = stats.saved
        families = [
            ("counter", "scopeguard_kept_state_lookups", stats.lookups,
             "Passages the reader looked up a kept state for before reading a question about them."),
            ("counter", "scopeguard_kept_state_hits", stats.hits,
             "Lookups that found the passage's state kept (in memory or saved on disk): not read again."),
            ("gauge", "scopeguard_kept_state_hit_ratio", stats.hit_rate,
             "scopeguard_kept_state_hits / scopeguard_kept_state_lookups since the server started."),
            ("gauge", "scopeguard_saved_states_bytes", None if saved is None else saved.bytes,
             "Bytes of the reader's saved-states folder (its disk budget evicts the least recently used)."),
            ("gauge", "scopeguard_saved_states", None if saved is None else saved.files,
             "State files in the reader's saved-states folder."),
        ]  # fmt: skip
        for kind, name, value, doc in families:
            if value is not None:  # absent: no lookup yet, or no folder
                family = self._core.CounterMetricFamily if kind == "counter" else self._core.GaugeMetricFamily
                yield family(name, doc, value=value)
