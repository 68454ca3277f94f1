"""The console's time series, folded incrementally from the event log (a cursor).

Per persona and UTC hour: runs by outcome, spend and policy denials; per persona its most
recent runs; per run its persona (so a run page reads one persona's events, not the log).
Only the kinds counted here are read (``kinds=``), and each page load reads only the
events appended since the previous one, so a fleet page stays flat in cost as the log
grows (``benchmarks/console.py``: 1,000 personas, 100,000 runs).
"""

from __future__ import annotations

import threading
from array import array
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from charter.runtime import Event, EventLog, Kind, format_time

from ..events import RunKind

HOUR = 3600
KEEP_HOURS = 31 * 24  # the longest window drawn (30 days) and the day it started in
OUTCOMES = ("completed", "failed", "duplicate", "dead_lettered")
# one bucket: runs by outcome, then spend in USD, then policy denials
COMPLETED, FAILED, DUPLICATE, DEAD, SPEND, DENIALS = range(6)
RECENT = 25
KINDS = (
    Kind.RUN_STARTED,
    Kind.RUN_COMPLETED,
    Kind.RUN_FAILED,
    Kind.RUN_DUPLICATE,
    Kind.DEAD_LETTERED,
    Kind.SPEND_RECORDED,
    RunKind.TOOL_DENIED,
)
_PAGE = 20_000
_ZEROS = (0.0,) * 6


def hour_of(at: datetime) -> int:
    """Hours since the epoch (the bucket of ``at``)."""
    return int(at.timestamp()) // HOUR


@dataclass
class PersonaSeries:
    # arrays, not lists: a month of hours for 1,000 personas is ~720,000 buckets, and an
    # array holds no references, so the garbage collector never walks them
    hours: dict[int, array[float]] = field(default_factory=dict)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT))

    def bucket(self, hour: int) -> array[float]:
        found = self.hours.get(hour)
        if found is None:
            found = self.hours[hour] = array("d", _ZEROS)
        return found


class Series:
    """The fold (thread-safe; one per app)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cursor = 0
        self.personas: dict[str, PersonaSeries] = {}
        self.run_persona: dict[str, str] = {}
        self.started: dict[str, str] = {}  # run_id -> started_at, until it finishes

    def update(self, log: EventLog) -> None:
        """Fold the events appended since the last call."""
        with self.lock:
            last = log.last_event_id()
            while True:
                page = log.read(after=self.cursor, limit=_PAGE, kinds=KINDS)
                for event in page:
                    self._fold(event)
                if page:
                    self.cursor = page[-1].event_id
                if len(page) < _PAGE:
                    break
            # nothing of ours after the last one read: skip past the rest next time too
            self.cursor = max(self.cursor, last)
            for persona in self.personas.values():  # older hours are never drawn
                if len(persona.hours) > KEEP_HOURS + 24:
                    newest = max(persona.hours)
                    for hour in [h for h in persona.hours if h < newest - KEEP_HOURS]:
                        del persona.hours[hour]

    def _fold(self, event: Event) -> None:
        p = event.payload
        kind = event.kind
        persona = self.personas.get(event.persona)
        if persona is None:
            persona = self.personas[event.persona] = PersonaSeries()
        at = event.occurred_at
        run_id = p.get("run_id")
        if kind == Kind.RUN_STARTED:
            if run_id:
                self.run_persona[run_id] = event.persona
                self.started[run_id] = format_time(at)
            return
        bucket = persona.bucket(hour_of(at))
        if kind in (Kind.RUN_COMPLETED, Kind.RUN_FAILED):
            failed = kind == Kind.RUN_FAILED
            bucket[FAILED if failed else COMPLETED] += 1
            cost = float(p.get("cost_usd") or 0.0)
            bucket[SPEND] += cost
            if run_id:
                self.run_persona[run_id] = event.persona
                persona.recent.append(
                    {
                        "run_id": run_id,
                        "status": "failed" if failed else "completed",
                        "started_at": self.started.pop(run_id, None),
                        "finished_at": format_time(at),
                        "cost_usd": cost,
                        "tokens": int(p.get("tokens") or 0),
                        "work_key": p.get("work_key"),
                        "error": p.get("error"),
                        "event_id": event.event_id,
                    }
                )
        elif kind == Kind.RUN_DUPLICATE:
            bucket[DUPLICATE] += 1
        elif kind == Kind.DEAD_LETTERED:
            bucket[DEAD] += 1
        elif kind == Kind.SPEND_RECORDED:
            bucket[SPEND] += float(p.get("cost_usd") or 0.0)
        elif kind == RunKind.TOOL_DENIED:
            bucket[DENIALS] += 1

    # -- reads (call update first) ---------------------------------------------------

    def persona_of(self, run_id: str) -> str | None:
        with self.lock:
            return self.run_persona.get(run_id)

    def hourly(self, persona: str, end: datetime, hours: int) -> list[list[float]]:
        """``hours`` buckets ending with the hour of ``end`` (oldest first)."""
        last = hour_of(end)
        with self.lock:
            found = self.personas.get(persona)
            table = found.hours if found is not None else {}
            return [list(table.get(h, (0.0,) * 6)) for h in range(last - hours + 1, last + 1)]

    def sparklines(
        self, persona: str, end: datetime, hours: int = 24
    ) -> tuple[list[int], list[float]]:
        """Runs (completed and failed) and spend per hour over ``hours`` ending at ``end``."""
        last = hour_of(end)
        runs = [0] * hours
        spend = [0.0] * hours
        with self.lock:
            found = self.personas.get(persona)
            if found is None or not found.hours:
                return runs, spend
            table = found.hours
            for k, hour in enumerate(range(last - hours + 1, last + 1)):
                row = table.get(hour)
                if row is not None:
                    runs[k] = int(row[COMPLETED] + row[FAILED])
                    spend[k] = round(row[SPEND], 6)
        return runs, spend

    def daily(self, persona: str, end: datetime, days: int) -> list[list[float]]:
        """``days`` UTC-day buckets ending with the day of ``end`` (oldest first)."""
        first_day = (end.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
                     - timedelta(days=days - 1))  # fmt: skip
        first = hour_of(first_day)
        out = [[0.0] * 6 for _ in range(days)]
        with self.lock:
            found = self.personas.get(persona)
            for hour, values in (found.hours if found is not None else {}).items():
                index = (hour - first) // 24
                if 0 <= index < days:
                    row = out[index]
                    for k in range(6):
                        row[k] += values[k]
        return out

    def recent(self, persona: str) -> list[dict[str, Any]]:
        """The persona's latest finished runs, newest first."""
        with self.lock:
            found = self.personas.get(persona)
            return [dict(r) for r in reversed(found.recent)] if found is not None else []


__all__ = ["OUTCOMES", "Series", "hour_of"]
