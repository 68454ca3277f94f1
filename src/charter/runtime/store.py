"""Choosing a backend: ``--state URL`` / ``CHARTER_STATE_URL`` or a state directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .events import TOPIC
from .log import EventLog, EventLogError

DEFAULT_STATE_DIR = Path(".charter") / "personas"
STATE_URL_ENV = "CHARTER_STATE_URL"


def open_event_log(
    *,
    state_dir: str | Path | None = None,
    url: str | None = None,
    env: Mapping[str, str] | None = None,
    topic: str = TOPIC,
) -> EventLog:
    """Open the log: an explicit URL wins, then ``CHARTER_STATE_URL``, then SQLite."""
    environ = os.environ if env is None else env
    chosen = url or environ.get(STATE_URL_ENV) or None
    if chosen:
        if chosen.startswith(("postgresql://", "postgres://")):
            from .postgres_log import PostgresEventLog

            return PostgresEventLog(chosen, topic=topic)
        if chosen.startswith("sqlite:"):
            path = chosen.removeprefix("sqlite:").removeprefix("//")
            from .sqlite_log import SqliteEventLog

            return SqliteEventLog(path or DEFAULT_STATE_DIR, topic=topic)
        raise EventLogError(
            f"unsupported state URL {chosen!r}: use postgresql://... or a --state-dir"
        )
    from .sqlite_log import SqliteEventLog

    return SqliteEventLog(state_dir if state_dir is not None else DEFAULT_STATE_DIR, topic=topic)
