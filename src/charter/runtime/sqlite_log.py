"""SQLite backend: one file, WAL journal, writers serialised by ``BEGIN IMMEDIATE``."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .clock import parse_time
from .events import TOPIC, Event, NewEvent
from .log import (
    COMPLETED_KIND,
    DELIVERY_KIND,
    Completion,
    EventLog,
    EventLogError,
    LogTransaction,
    Prefetch,
    Snapshot,
    check_limit,
)
from .rows import build_rows

DB_FILENAME = "events.sqlite3"
POLL_SECONDS = 0.005

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    topic TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    persona TEXT NOT NULL,
    persona_version TEXT,
    actor TEXT NOT NULL,
    kind TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    payload TEXT NOT NULL,
    chain TEXT,
    PRIMARY KEY (topic, event_id)
);
CREATE INDEX IF NOT EXISTS events_by_persona ON events (topic, persona, event_id);
CREATE INDEX IF NOT EXISTS events_completed_by_key ON events
    (topic, persona, json_extract(payload, '$.work_key'), event_id)
    WHERE kind = 'persona.run.completed';
CREATE INDEX IF NOT EXISTS events_delivery_by_id ON events
    (topic, persona, json_extract(payload, '$.delivery_id'))
    WHERE kind = 'persona.delivery.received';
CREATE TABLE IF NOT EXISTS topics (
    topic TEXT PRIMARY KEY,
    last_event_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chain_heads (
    topic TEXT NOT NULL,
    persona TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    link TEXT NOT NULL,
    PRIMARY KEY (topic, persona)
);
CREATE TABLE IF NOT EXISTS chain_format (
    topic TEXT PRIMARY KEY,
    chains_from INTEGER NOT NULL,
    anchor TEXT
);
CREATE TABLE IF NOT EXISTS snapshots (
    topic TEXT NOT NULL,
    persona TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (topic, persona)
);
"""

_COLUMNS = "event_id, persona, persona_version, actor, kind, occurred_at, payload"
_INSERT = f"INSERT INTO events (topic, {_COLUMNS}, chain) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_SET_LAST = (
    "INSERT INTO topics (topic, last_event_id) VALUES (?, ?) "
    "ON CONFLICT (topic) DO UPDATE SET last_event_id = excluded.last_event_id"
)
_SET_HEAD = (
    "INSERT INTO chain_heads (topic, persona, event_id, link) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (topic, persona) DO UPDATE SET event_id = excluded.event_id, "
    "link = excluded.link"
)


def completions_sql(keys: int) -> str:
    """The latest completion of each of ``keys`` work keys. A bare column beside max()
    comes from the row holding the max (SQLite documents it); the kind is a literal so the
    partial index applies."""
    return (
        "SELECT json_extract(payload, '$.work_key') AS k, max(event_id), "
        "json_extract(payload, '$.run_id'), json_extract(payload, '$.duplicate_until') "
        f"FROM events WHERE topic = ? AND persona = ? AND kind = '{COMPLETED_KIND}' "
        f"AND json_extract(payload, '$.work_key') IN ({', '.join('?' * keys)}) GROUP BY k"
    )


class _SqliteTxn(LogTransaction):
    def __init__(
        self, conn: sqlite3.Connection, topic: str, writable: bool, anchor: str | None = None
    ) -> None:
        self._conn = conn
        self._topic = topic
        self._writable = writable
        self._anchor = anchor or ""
        self._last: tuple[int, str | None] | None = None
        # each appended persona's chain link (read once: the writer holds the lock)
        self._heads: dict[str, str] = {}

    def last_event_id(self) -> int:
        if self._writable:
            return self._head()[0]
        row = self._conn.execute(
            "SELECT last_event_id FROM topics WHERE topic = ?", (self._topic,)
        ).fetchone()
        return int(row[0]) if row else 0

    def append(self, events: Sequence[NewEvent]) -> list[Event]:
        if not self._writable:
            raise EventLogError("append needs a write transaction")
        if not events:
            return []
        last, _ = self._head()
        missing = list({e.persona for e in events} - self._heads.keys())
        if missing:
            found = self._chain_heads(missing)
            for persona in missing:
                self._heads[persona] = found[persona][1] if persona in found else self._anchor
        out, rows = build_rows(self._topic, last, self._heads, events)
        self._conn.executemany(_INSERT, rows)
        ends = {row[2]: row for row in rows}  # each persona's last row
        self._conn.executemany(
            _SET_HEAD, [(self._topic, p, row[1], row[-1]) for p, row in ends.items()]
        )
        self._conn.execute(_SET_LAST, (self._topic, out[-1].event_id))
        self._last = out[-1].event_id, rows[-1][-1]
        return out

    def _chain_heads(self, personas: Sequence[str] | None) -> dict[str, tuple[int, str]]:
        query = "SELECT persona, event_id, link FROM chain_heads WHERE topic = ?"
        params: list[Any] = [self._topic]
        if personas is not None:
            query += f" AND persona IN ({', '.join('?' * len(personas))})"
            params.extend(personas)
        return {r[0]: (int(r[1]), r[2]) for r in self._conn.execute(query, params)}

    def chain_heads(self) -> dict[str, tuple[int, str]]:
        return self._chain_heads(None)

    def link_before(self, persona: str, event_id: int) -> tuple[int, str | None] | None:
        row = self._conn.execute(
            "SELECT event_id, chain FROM events WHERE topic = ? AND persona = ? AND "
            "event_id < ? ORDER BY event_id DESC LIMIT 1",
            (self._topic, persona, event_id),
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def _head(self) -> tuple[int, str | None]:
        """The last id and its chain link; read once per transaction (the writer holds the
        lock, so only its own appends move them)."""
        if self._last is None:
            row = self._conn.execute(
                "SELECT t.last_event_id, e.chain FROM topics t LEFT JOIN events e "
                "ON e.topic = t.topic AND e.event_id = t.last_event_id WHERE t.topic = ?",
                (self._topic,),
            ).fetchone()
            self._last = (int(row[0]), row[1]) if row else (0, None)
        return self._last

    def read(
        self,
        *,
        after: int = 0,
        persona: str | None = None,
        limit: int | None = None,
        kinds: Collection[str] | None = None,
    ) -> list[Event]:
        check_limit(limit)
        sql = f"SELECT {_COLUMNS} FROM events WHERE topic = ? AND event_id > ?"
        params: list[Any] = [self._topic, after]
        if persona is not None:
            sql += " AND persona = ?"
            params.append(persona)
        if kinds is not None:
            wanted = sorted(kinds)
            sql += f" AND kind IN ({', '.join('?' * len(wanted))})" if wanted else " AND 0"
            params.extend(wanted)
        sql += " ORDER BY event_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [
            Event(
                int(r[0]), self._topic, r[1], r[4], parse_time(r[5]), json.loads(r[6]), r[3], r[2]
            )
            for r in self._conn.execute(sql, params)
        ]

    def chains(self, *, after: int = 0, limit: int | None = None) -> list[tuple[int, str | None]]:
        check_limit(limit)
        sql = (
            "SELECT event_id, chain FROM events WHERE topic = ? AND event_id > ? ORDER BY event_id"
        )
        params: list[Any] = [self._topic, after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [(int(r[0]), r[1]) for r in self._conn.execute(sql, params)]

    def load_snapshot(self, persona: str) -> Snapshot | None:
        row = self._conn.execute(
            "SELECT event_id, version, state FROM snapshots WHERE topic = ? AND persona = ?",
            (self._topic, persona),
        ).fetchone()
        if row is None:
            return None
        return Snapshot(persona, int(row[0]), int(row[1]), json.loads(row[2]))

    def snapshot_at(self, persona: str, version: int) -> int | None:
        row = self._conn.execute(
            "SELECT event_id FROM snapshots WHERE topic = ? AND persona = ? AND version = ?",
            (self._topic, persona, version),
        ).fetchone()
        return None if row is None else int(row[0])

    def completions(self, persona: str, work_keys: Sequence[str]) -> dict[str, Completion]:
        keys = list(dict.fromkeys(work_keys))
        if not keys:
            return {}
        rows = self._conn.execute(completions_sql(len(keys)), (self._topic, persona, *keys))
        return {r[0]: Completion(r[0], int(r[1]), r[2], r[3]) for r in rows}

    def deliveries(self, persona: str, delivery_ids: Sequence[str]) -> dict[str, int]:
        ids = list(dict.fromkeys(delivery_ids))
        if not ids:
            return {}
        rows = self._conn.execute(
            "SELECT json_extract(payload, '$.delivery_id') AS d, min(event_id) FROM events "
            f"WHERE topic = ? AND persona = ? AND kind = '{DELIVERY_KIND}' "
            f"AND json_extract(payload, '$.delivery_id') IN ({', '.join('?' * len(ids))}) "
            "GROUP BY d",
            (self._topic, persona, *ids),
        )
        return {str(r[0]): int(r[1]) for r in rows}

    def save_snapshot(self, snapshot: Snapshot) -> None:
        if not self._writable:
            raise EventLogError("save_snapshot needs a write transaction")
        self._conn.execute(
            "INSERT INTO snapshots (topic, persona, event_id, version, state) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (topic, persona) DO UPDATE SET "
            "event_id = excluded.event_id, version = excluded.version, state = excluded.state",
            (
                self._topic,
                snapshot.persona,
                snapshot.event_id,
                snapshot.version,
                json.dumps(snapshot.state, separators=(",", ":")),
            ),
        )


class SqliteEventLog(EventLog):
    """The embedded default: ``<state_dir>/events.sqlite3``."""

    backend = "sqlite"

    def __init__(
        self, state_dir: str | Path, *, topic: str = TOPIC, busy_timeout_ms: int = 30_000
    ) -> None:
        self.topic = topic
        self.path = Path(state_dir) / DB_FILENAME
        self._busy_timeout_ms = busy_timeout_ms
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=busy_timeout_ms / 1000
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            # several processes opening a new state at once: switching a journal mode
            # fails at once, without SQLite's busy wait, while another one holds a lock
            # (seen as a CLI trigger answering "database is locked", under load)
            mode = self._retry_busy("PRAGMA journal_mode = WAL", "open the state").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise EventLogError(f"{self.path}: could not enable WAL journaling")
            # WAL + NORMAL survives a killed process; only power loss can drop the last commits.
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._begin_immediate()
            for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                self._conn.execute(statement)
            columns = {r[1] for r in self._conn.execute("PRAGMA table_info(events)")}
            if "chain" not in columns:  # a log from before the hash chain: it starts now
                self._conn.execute("ALTER TABLE events ADD COLUMN chain TEXT")
            self.chains_from, self.anchor = self._chain_format()
            self._conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            raise EventLogError(f"cannot open state at {self.path}: {exc}") from exc

    def _chain_format(self) -> tuple[int, str | None]:
        """Where persona chains start (under the write lock). A log written before them is
        migrated in place: its events keep the topic-wide chain, and every persona chain
        starts from that chain's head (see charter.runtime.audit)."""
        row = self._conn.execute(
            "SELECT chains_from, anchor FROM chain_format WHERE topic = ?", (self.topic,)
        ).fetchone()
        if row is not None:
            return int(row[0]), row[1]
        head = _SqliteTxn(self._conn, self.topic, writable=True)._head()
        self._conn.execute("INSERT INTO chain_format VALUES (?, ?, ?)", (self.topic, *head))
        return head

    def describe(self) -> str:
        return str(self.path)

    def _begin_immediate(self) -> None:
        """Take the write lock, retrying while another process holds it.

        ``busy_timeout`` already waits inside SQLite, but SQLite returns SQLITE_BUSY
        without waiting in some cases (a WAL checkpoint or recovery in progress), so the
        BEGIN is retried with jittered backoff until the same deadline. Nothing has run
        yet when BEGIN fails, so a retry cannot repeat any work.
        """
        self._retry_busy("BEGIN IMMEDIATE", "start a write")

    def _retry_busy(self, statement: str, what: str) -> sqlite3.Cursor:
        """Execute ``statement`` (one that has done nothing when it fails busy), retried
        with jittered backoff while another process holds the lock, up to the busy
        timeout."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        delay = 0.005
        while True:
            try:
                return self._conn.execute(statement)
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if "locked" not in text and "busy" not in text:
                    raise EventLogError(f"{self.path}: cannot {what}: {exc}") from exc
                if time.monotonic() >= deadline:
                    raise EventLogError(
                        f"{self.path}: the state is busy: another process held the write "
                        f"lock for over {self._busy_timeout_ms / 1000:g} s ({exc})"
                    ) from exc
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    @contextmanager
    def write(
        self, *, prefetch: Prefetch | Sequence[Prefetch] | None = None
    ) -> Iterator[LogTransaction]:
        self._begin_immediate()
        try:
            yield _SqliteTxn(self._conn, self.topic, writable=True, anchor=self.anchor)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        self.commits += 1

    @contextmanager
    def read_view(self) -> Iterator[LogTransaction]:
        self._conn.execute("BEGIN")
        try:
            yield _SqliteTxn(self._conn, self.topic, writable=False)
        finally:
            self._conn.execute("COMMIT")

    def wait_for_append(self, after_event_id: int, timeout: float) -> bool:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            self.last_seen = self.last_event_id()
            if self.last_seen > after_event_id:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(POLL_SECONDS, remaining))

    def close(self) -> None:
        self._conn.close()
