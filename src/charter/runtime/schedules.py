"""Cron schedules: the soonest next wake over all of a persona's schedules."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from cronsim import CronSim, CronSimError

from charter.errors import CharterError

from .clock import ensure_utc


class ScheduleError(CharterError, ValueError):
    """A cron expression is invalid."""


def validate_schedule(expr: str) -> None:
    try:
        CronSim(expr, datetime(2000, 1, 1))
    except CronSimError as exc:
        raise ScheduleError(f"invalid cron schedule {expr!r}: {exc}") from None


def next_scheduled_run(schedules: Iterable[str], *, now: datetime) -> datetime | None:
    """The earliest occurrence strictly after ``now`` over every schedule (UTC), or None."""
    now = ensure_utc(now)
    best: datetime | None = None
    for expr in schedules:
        try:
            upcoming = next(CronSim(expr, now))
        except CronSimError as exc:
            raise ScheduleError(f"invalid cron schedule {expr!r}: {exc}") from None
        except StopIteration:
            continue
        upcoming = ensure_utc(upcoming)
        if best is None or upcoming < best:
            best = upcoming
    return best
