"""Time helpers. Every time-dependent runtime function takes an explicit ``at``/``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = [
    "add_seconds",
    "day_window",
    "ensure_utc",
    "format_time",
    "hour_window",
    "parse_time",
    "utc_now",
]


def utc_now() -> datetime:
    """The wall clock, only ever used as a CLI default; library code takes ``at``."""
    return datetime.now(UTC)


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 timestamp (``Z`` or an offset required) into an aware UTC datetime."""
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}") from None
    if value.tzinfo is None:
        raise ValueError(f"timestamp needs a time zone (Z or +HH:MM): {text!r}")
    return value.astimezone(UTC)


def ensure_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetimes are not accepted; pass an aware UTC time")
    return value.astimezone(UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix; microseconds only when present."""
    value = ensure_utc(value)
    spec = "microseconds" if value.microsecond else "seconds"
    return value.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def hour_window(at: datetime) -> str:
    """The UTC hour bucket used by ``hourly_usd``: ``2026-04-24T12``."""
    return ensure_utc(at).strftime("%Y-%m-%dT%H")


def day_window(at: datetime) -> str:
    """The UTC day bucket used by ``daily_usd`` and ``max_tokens``: ``2026-04-24``."""
    return ensure_utc(at).strftime("%Y-%m-%d")


def add_seconds(at: datetime, seconds: float) -> datetime:
    return ensure_utc(at) + timedelta(seconds=seconds)
