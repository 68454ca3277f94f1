"""Shared set-up for the runtime benchmarks: one SQLite dir and one PostgreSQL schema."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from charter.runtime import EventLog, PostgresEventLog, SqliteEventLog

PG_BASE = os.environ.get("CHARTER_BENCH_PG_URL", "postgresql://127.0.0.1:5432/test")


@contextmanager
def backends() -> Iterator[list[tuple[str, str]]]:
    """Yield [(backend, location)], cleaning up afterwards. PostgreSQL is skipped if down."""
    with tempfile.TemporaryDirectory() as tmp:
        out = [("sqlite", tmp)]
        url = f"{PG_BASE}?schema=charter_bench_{uuid.uuid4().hex[:10]}"
        try:
            PostgresEventLog(url).close()
            out.append(("postgresql", url))
        except Exception as exc:
            print(f"postgresql unavailable, skipped: {exc}")
            url = ""
        try:
            yield out
        finally:
            if url:
                log = PostgresEventLog(url)
                log.drop_schema()
                log.close()


def open_at(location: str) -> EventLog:
    if location.startswith("postgresql"):
        return PostgresEventLog(location)
    return SqliteEventLog(location)


def fresh(location: str, name: str) -> str:
    """A separate location (sub-directory or schema) for one measurement."""
    if location.startswith("postgresql"):
        base, _, _ = location.partition("?schema=")
        return f"{base}?schema={location.rpartition('=')[2]}_{name}"
    path = os.path.join(location, name)
    os.makedirs(path, exist_ok=True)
    return path


def drop(location: str) -> None:
    if location.startswith("postgresql"):
        log = PostgresEventLog(location)
        log.drop_schema()
        log.close()
