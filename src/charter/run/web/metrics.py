"""``/metrics``: Prometheus text from counters folded incrementally over the event log.

Each scrape reads only the events appended since the previous one (a cursor), so its
cost follows the new events, not the log's length.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from charter.runtime import EventLog, Kind

from ..events import APPROVAL_RESOLUTIONS, RunKind

_RUN_STATUS = {
    Kind.RUN_COMPLETED: "completed",
    Kind.RUN_FAILED: "failed",
    Kind.RUN_DUPLICATE: "duplicate",
    Kind.DEAD_LETTERED: "dead_lettered",
}
_SPEND = frozenset({Kind.RUN_COMPLETED, Kind.RUN_FAILED, Kind.SPEND_RECORDED})


class LogStats(Collector):
    """Runs by persona and status, denials by dimension, pending approvals, spend."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cursor = 0
        self.runs: Counter[tuple[str, str]] = Counter()
        self.denials: Counter[str] = Counter()
        self.pending: set[str] = set()
        self.spend: dict[str, float] = {}

    def update(self, log: EventLog) -> None:
        with self.lock:
            for event in log.read(after=self.cursor):
                self.cursor = event.event_id
                self._fold(event.kind, event.persona, event.payload)

    def _fold(self, kind: str, persona: str, payload: dict[str, Any]) -> None:
        if kind in _RUN_STATUS:
            self.runs[(persona, _RUN_STATUS[kind])] += 1
        if kind in _SPEND:
            self.spend[persona] = self.spend.get(persona, 0.0) + float(
                payload.get("cost_usd") or 0.0
            )
        if kind == RunKind.TOOL_DENIED:
            decision = payload.get("decision")
            dimension = decision.get("dimension") if isinstance(decision, dict) else None
            self.denials[str(dimension or "unknown")] += 1
        aid = payload.get("approval_id")
        if aid and kind == RunKind.APPROVAL_REQUESTED:
            self.pending.add(str(aid))
        elif aid and kind in APPROVAL_RESOLUTIONS:
            self.pending.discard(str(aid))

    def collect(self) -> Iterable[Any]:
        with self.lock:
            runs = CounterMetricFamily(
                "charter_runs", "Finished runs by persona and status.", labels=["persona", "status"]
            )
            for (persona, status), n in sorted(self.runs.items()):
                runs.add_metric([persona, status], n)
            denials = CounterMetricFamily(
                "charter_denials", "Tool calls denied, by policy dimension.", labels=["dimension"]
            )
            for dimension, n in sorted(self.denials.items()):
                denials.add_metric([dimension], n)
            pending = GaugeMetricFamily(
                "charter_approvals_pending", "Approval requests awaiting a decision."
            )
            pending.add_metric([], len(self.pending))
            spend = CounterMetricFamily(
                "charter_budget_spend_usd", "Model spend recorded, by persona.", labels=["persona"]
            )
            for persona, usd in sorted(self.spend.items()):
                spend.add_metric([persona], usd)
            last = GaugeMetricFamily("charter_last_event_id", "The event log's last event id.")
            last.add_metric([], self.cursor)
        return [runs, denials, pending, spend, last]


class Metrics:
    """One registry per app: the log stats plus the admission latency histogram."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.stats = LogStats()
        self.registry.register(self.stats)
        self.admission = Histogram(
            "charter_admission_seconds",
            "Time to verify, normalise and admit a webhook.",
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )

    def render(self, log: EventLog) -> bytes:
        self.stats.update(log)
        return generate_latest(self.registry)


__all__ = ["LogStats", "Metrics"]
