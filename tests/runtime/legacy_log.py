"""A log as charter wrote it before persona chains (issue 36): one topic-wide chain.

Frozen here so that the migration can be tested against that format after the code that
wrote it is gone: the tables as the backends created them (no ``chain_heads``, no
``chain_format``), each event's link covering the topic's previous event, and version 1
checkpoints (``{v: 1, topic, event_id, chain}`` signed). Rows are written with plain SQL,
as that code's ``build_rows`` laid them out.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from charter.runtime.audit import chain_hash
from charter.runtime.clock import format_time
from charter.runtime.events import TOPIC, Event
from charter.runtime.postgres_log import split_state_url
from charter.runtime.signing import AUDIT_PERSONA, CHECKPOINT_KIND, message, public_key_text

AT = datetime(2026, 11, 1, tzinfo=UTC)

_SQLITE = """
CREATE TABLE events (topic TEXT NOT NULL, event_id INTEGER NOT NULL, persona TEXT NOT NULL,
    persona_version TEXT, actor TEXT NOT NULL, kind TEXT NOT NULL, occurred_at TEXT NOT NULL,
    payload TEXT NOT NULL, chain TEXT, PRIMARY KEY (topic, event_id));
CREATE INDEX events_by_persona ON events (topic, persona, event_id);
CREATE TABLE topics (topic TEXT PRIMARY KEY, last_event_id INTEGER NOT NULL);
CREATE TABLE snapshots (topic TEXT NOT NULL, persona TEXT NOT NULL, event_id INTEGER NOT NULL,
    version INTEGER NOT NULL, state TEXT NOT NULL, PRIMARY KEY (topic, persona));
"""

_POSTGRES = """
CREATE SCHEMA {s};
CREATE TABLE {s}.events (topic TEXT NOT NULL, event_id BIGINT NOT NULL, persona TEXT NOT NULL,
    persona_version TEXT, actor TEXT NOT NULL, kind TEXT NOT NULL,
    occurred_at TIMESTAMPTZ NOT NULL, payload JSONB NOT NULL, chain TEXT,
    PRIMARY KEY (topic, event_id));
CREATE INDEX events_by_persona ON {s}.events (topic, persona, event_id);
CREATE TABLE {s}.topics (topic TEXT PRIMARY KEY, last_event_id BIGINT NOT NULL);
CREATE TABLE {s}.snapshots (topic TEXT NOT NULL, persona TEXT NOT NULL,
    event_id BIGINT NOT NULL, version INTEGER NOT NULL, state JSONB NOT NULL,
    PRIMARY KEY (topic, persona));
"""

KINDS = [
    "persona.trigger.received",
    "persona.lease.acquired",
    "persona.run.started",
    "persona.run.completed",
    "persona.lease.released",
]


def legacy_events(count: int, personas: int = 5) -> list[Event]:
    """``count`` events over ``personas`` personas, with the payload shapes a runtime
    writes (floats, non-ASCII text, nesting)."""
    out = []
    for i in range(1, count + 1):
        persona = f"worker{i % personas}"
        payload: dict[str, Any] = {
            "work_key": f"github:acme/app:pr:{i // 5}",
            "run_id": f"run_{i - i % 5 + 1}",
            "cost_usd": 0.1 + 0.2 * (i % 7),
            "note": "zürich ✓" if i % 3 else "",
            "detail": {"attempt": i % 4, "tags": ["a", "b"][: i % 3]},
        }
        out.append(
            Event(
                i,
                TOPIC,
                persona,
                KINDS[i % len(KINDS)],
                AT + timedelta(seconds=i, microseconds=(7 * i) % 1_000_000),
                payload,
                "charter",
                "1" if i % 2 else None,
            )
        )
    return out


def _chained(events: list[Event]) -> list[tuple[Event, str]]:
    previous: str | None = None
    rows = []
    for event in events:
        previous = chain_hash(previous, event)
        rows.append((event, previous))
    return rows


def with_v1_checkpoint(events: list[Event], key: Any) -> list[Event]:
    """``events`` and a version 1 checkpoint signing the topic-wide head after them."""
    head = _chained(events)[-1][1]
    last = events[-1].event_id
    payload = {
        "event_id": last,
        "chain": head,
        "topic": TOPIC,
        "public_key": public_key_text(key.public_key()),
        "signature": key.sign(message(TOPIC, last, head)).hex(),
    }
    at = events[-1].occurred_at + timedelta(seconds=1)
    signed = Event(last + 1, TOPIC, AUDIT_PERSONA, CHECKPOINT_KIND, at, payload, "charter", None)
    return [*events, signed]


def _row(event: Event, link: str) -> tuple[Any, ...]:
    body = json.dumps(event.payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (event.topic, event.event_id, event.persona, event.persona_version, event.actor,
            event.kind, format_time(event.occurred_at), body, link)  # fmt: skip


def write_sqlite(state_dir: Path, events: list[Event]) -> str:
    """Write ``events`` as the old SQLite backend did; returns the head link."""
    state_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(state_dir / "events.sqlite3")
    conn.executescript(_SQLITE)
    rows = _chained(events)
    conn.executemany(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [_row(e, c) for e, c in rows]
    )
    conn.execute("INSERT INTO topics VALUES (?, ?)", (TOPIC, events[-1].event_id))
    conn.commit()
    conn.close()
    return rows[-1][1]


def write_postgres(url: str, events: list[Event]) -> str:
    """Write ``events`` as the old PostgreSQL backend did; returns the head link."""
    conninfo, schema = split_state_url(url)
    rows = _chained(events)
    with psycopg.connect(conninfo) as conn:
        conn.execute(sql.SQL(_POSTGRES).format(s=sql.Identifier(schema)))  # type: ignore[arg-type]
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL("INSERT INTO {}.events VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)").format(
                    sql.Identifier(schema)
                ),
                [_row(e, c) for e, c in rows],
            )
        conn.execute(
            sql.SQL("INSERT INTO {}.topics VALUES (%s, %s)").format(sql.Identifier(schema)),
            (TOPIC, events[-1].event_id),
        )
    return rows[-1][1]


def verify_legacy(events_and_links: list[tuple[Event, str | None]]) -> int:
    """Check the topic-wide chain as the old ``audit verify`` did: every link covers the
    previous event's; returns the events checked (raises on the first bad one)."""
    previous: str | None = None
    for event, link in events_and_links:
        if link != chain_hash(previous, event):
            raise AssertionError(f"event {event.event_id} does not link")
        previous = link
    return len(events_and_links)
