"""PostgreSQL backend (psycopg 3) for many hosts sharing one state store.

Selected by a ``postgresql://`` URL. An optional ``schema`` query parameter (default
``charter``) names the schema holding the tables; it is stripped before connecting.
Writers serialise on a transaction-scoped advisory lock per (schema, topic), so ids are
assigned and committed in order; commits ``NOTIFY`` followers (``LISTEN``).

A client that vanishes inside a write transaction (a host cut off by a partition, a
paused VM) would keep that lock, and so every other writer waiting, until the server
notices the dead connection: TCP keepalive, hours by default. charter's connections set
``idle_in_transaction_session_timeout`` (:data:`IDLE_IN_TRANSACTION_MS`) so the server
ends such a session after a few seconds; its transaction never commits. charter never
leaves a transaction idle that long between statements. An ``options`` connection
parameter (or ``PGOPTIONS``) that sets the timeout itself is kept as given.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

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

DEFAULT_SCHEMA = "charter"
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: The server ends a session idle this long inside a transaction (see the module doc).
IDLE_IN_TRANSACTION_MS = 5000
_IDLE_SETTING = "idle_in_transaction_session_timeout"


#: The client side of the same: a connection whose sent data stays unacknowledged this
#: long (a partition: nothing is reset, TCP would retry for about 15 minutes) is closed,
#: and an idle one is probed by keepalives, so a cut-off replica's threads fail and
#: reconnect in seconds (its webhooks get a 503) instead of hanging on a dead socket.
#: Each is kept as given in the URL.
CLIENT_TIMEOUTS = {
    "tcp_user_timeout": "10000",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}


def session_conninfo(conninfo: str) -> str:
    """``conninfo`` with charter's session settings added to its ``options`` (or to
    ``PGOPTIONS``, which an explicit ``options`` replaces), unless already set there, and
    the client's :data:`CLIENT_TIMEOUTS` unless set."""
    try:
        given = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return conninfo  # psycopg.connect reports the bad conninfo itself
    extra = {key: value for key, value in CLIENT_TIMEOUTS.items() if key not in given}
    options = given.get("options")
    base = str(options) if options is not None else os.environ.get("PGOPTIONS", "")
    if _IDLE_SETTING not in base:
        extra["options"] = f"{base} -c {_IDLE_SETTING}={IDLE_IN_TRANSACTION_MS}".strip()
    return make_conninfo(conninfo, **extra) if extra else conninfo


def split_state_url(url: str) -> tuple[str, str]:
    """Return (conninfo URL without ``schema``, schema name)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise EventLogError(f"not a PostgreSQL URL: {redact(url)}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = DEFAULT_SCHEMA
    rest: list[tuple[str, str]] = []
    for key, value in query:
        if key == "schema":
            schema = value
        else:
            rest.append((key, value))
    if not _IDENT.match(schema):
        raise EventLogError(f"invalid schema name {schema!r} (lower-case identifier expected)")
    return urlunsplit(parts._replace(query=urlencode(rest))), schema


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


#: a ``%s`` or ``%(name)s`` placeholder of a statement (``%%`` is not used)
_PLACEHOLDER = re.compile(rb"%(?:\((\w+)\))?s")

#: a NOTIFY payload longer than this leaves the kinds out (listeners then read to know)
NOTIFY_MAX = 7000


def _notice(payload: str) -> tuple[str, int, list[str]] | None:
    """A NOTIFY payload's ``(topic, last id, kinds)``, or ``None`` if it is not one."""
    try:
        sent = json.loads(payload)
        topic, last, kinds = sent["topic"], sent["id"], sent["kinds"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(topic, str) or not isinstance(last, int) or not isinstance(kinds, list):
        return None
    return topic, last, [str(k) for k in kinds]


def _lock_key(schema: str, topic: str) -> int:
    digest = hashlib.sha256(f"charter:{schema}:{topic}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


#: batches of at least this many events go through ``COPY``; smaller ones are one
#: multi-row INSERT, sent in the same statement as the topic row and the NOTIFY (COPY
#: costs a second round trip, which only pays off once the rows are many;
#: benchmarks/runtime_append.py measures both)
COPY_MIN_ROWS = 24

_EVENT_COLUMNS = (
    "topic, event_id, persona, persona_version, actor, kind, occurred_at, payload, chain"
)


class _Results:
    """The results of one simple query of several statements, read in order."""

    def __init__(self, cursor: psycopg.Cursor[Any], results: list[int]) -> None:
        self._cursor = cursor
        self._results = results
        self._at = 0

    def of(self, statement: int) -> psycopg.Cursor[Any]:
        """The cursor at the result of the ``statement``-th statement (not before one
        already read)."""
        target = self._results[statement]
        while self._at < target:
            self._cursor.nextset()
            self._at += 1
        return self._cursor


#: values quoted per ``mogrify`` call, and the templates for each count (see _literals)
_CHUNK = 45
_TEMPLATES = {n: ", ".join(["%s"] * n) for n in range(1, _CHUNK + 1)}


class _PgTxn(LogTransaction):
    def __init__(self, log: PostgresEventLog, writable: bool) -> None:
        self._log = log
        self._conn = log._conn
        self._writable = writable
        # (last id, its chain link): read with the lock, then moved only by our appends
        self._last: tuple[int, str | None] | None = None
        # writes not sent yet: they go with the next read or with the COMMIT, in one
        # round trip (one simple query), so the lock is held for fewer round trips
        self._pending: list[tuple[Any, Any]] = []
        # read with the lock, per persona (each taken once; any write makes them stale):
        # load_persona's answer, {persona: ((version, limit), answer)}
        self._prefetched: dict[str, tuple[tuple[int, int], tuple[Snapshot | None, list[Event]]]]
        self._prefetched = {}
        # persona_since's rows, not decoded yet: {persona: ((version, limit, after),
        # stored snapshot id, rows)}
        self._since: dict[str, tuple[tuple[int, int, int], int | None, list[Any]]] = {}
        # completions: {persona: {key: completion or None}}
        self._completed: dict[str, dict[str, Completion | None]] = {}
        # each persona chain's link as this transaction moves it (read with the lock)
        self._heads: dict[str, str] = {}

    def _flush(self) -> None:
        """Send the queued writes (before a read, which must see them)."""
        if self._pending:
            pending, self._pending = self._pending, []
            self._log._send(pending)

    def _t(self, name: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self._log.schema), sql.Identifier(name))

    def last_event_id(self) -> int:
        if self._last is not None:
            return self._last[0]
        row = self._conn.execute(
            sql.SQL("SELECT last_event_id FROM {} WHERE topic = %s").format(self._t("topics")),
            (self._log.topic,),
        ).fetchone()
        return int(row[0]) if row else 0

    def append(self, events: Sequence[NewEvent]) -> list[Event]:
        if not self._writable:
            raise EventLogError("append needs a write transaction")
        if not events:
            return []
        assert self._last is not None, "a write transaction reads the head with its lock"
        # read before this write: stale now
        self._prefetched, self._since, self._completed = {}, {}, {}
        log = self._log
        missing = list({e.persona for e in events} - self._heads.keys())
        if missing:  # (others' rows only: this transaction's own are known here)
            found = self._conn.execute(log._read_heads, (log.topic, missing))
            self._take_heads(log._rows_heads(found), missing)
        out, rows = build_rows(log.topic, self._last[0], self._heads, events)
        ends = {row[2]: row for row in rows}  # each persona's last row: its chain's head
        heads = [value for p, row in ends.items() for value in (log.topic, p, row[1], row[-1])]
        # the NOTIFY payload (see wait_for_append): this append's last id and kinds
        kinds = sorted({e.kind for e in out})
        last = json.dumps(
            {"id": out[-1].event_id, "topic": log.topic, "kinds": kinds}, separators=(",", ":")
        )
        if len(last) > NOTIFY_MAX:  # (PostgreSQL's limit is 8000 bytes) listeners will ask
            last = json.dumps({"id": out[-1].event_id, "topic": log.topic})
        if len(rows) >= COPY_MIN_ROWS:
            self._flush()  # COPY cannot share a query: it goes at once
            with self._conn.cursor() as cur, cur.copy(log._copy_events) as copy:
                for row in rows:
                    copy.write_row(row)
            self._pending.append((log.heads_statement(len(ends)), heads))
            self._pending.append((log._set_last, (log.topic, out[-1].event_id, log.channel, last)))
        else:
            # one statement: the rows, the chains' heads, the topic's last id and the NOTIFY
            params: list[Any] = [value for row in rows for value in row]
            params += heads
            params += (log.topic, out[-1].event_id, log.channel, last)
            self._pending.append((log.insert_statement(len(rows), len(ends)), params))
        self._last = out[-1].event_id, rows[-1][-1]
        return out

    def _take_heads(self, found: dict[str, tuple[int, str]], personas: Iterable[str]) -> None:
        """Keep the chain heads read for ``personas`` (a persona without one starts from
        the log's anchor)."""
        anchor = self._log.anchor or ""
        for persona in personas:
            self._heads[persona] = found[persona][1] if persona in found else anchor

    def chain_heads(self) -> dict[str, tuple[int, str]]:
        self._flush()
        query = sql.SQL("SELECT persona, event_id, link FROM {} WHERE topic = %s").format(
            self._t("chain_heads")
        )
        return self._log._rows_heads(self._conn.execute(query, (self._log.topic,)))

    def link_before(self, persona: str, event_id: int) -> tuple[int, str | None] | None:
        self._flush()
        row = self._conn.execute(
            sql.SQL(
                "SELECT event_id, chain FROM {} WHERE topic = %s AND persona = %s AND "
                "event_id < %s ORDER BY event_id DESC LIMIT 1"
            ).format(self._t("events")),
            (self._log.topic, persona, event_id),
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def read(
        self,
        *,
        after: int = 0,
        persona: str | None = None,
        limit: int | None = None,
        kinds: Collection[str] | None = None,
    ) -> list[Event]:
        check_limit(limit)
        self._flush()
        params: list[Any] = [self._log.topic, after]
        if persona is not None:
            params.append(persona)
        if kinds is not None:
            params.append(sorted(kinds))
        if limit is not None:
            params.append(limit)
        query = self._log._read_query(persona is not None, limit is not None, kinds is not None)
        return self._log._events(self._conn.execute(query, params))

    def chains(self, *, after: int = 0, limit: int | None = None) -> list[tuple[int, str | None]]:
        check_limit(limit)
        self._flush()
        query = sql.SQL(
            "SELECT event_id, chain FROM {} WHERE topic = %s AND event_id > %s ORDER BY event_id"
        ).format(self._t("events"))
        params: list[Any] = [self._log.topic, after]
        if limit is not None:
            query += sql.SQL(" LIMIT %s")
            params.append(limit)
        return [(int(r[0]), r[1]) for r in self._conn.execute(query, params)]

    def load_persona(
        self, persona: str, version: int, limit: int
    ) -> tuple[Snapshot | None, list[Event]]:
        found = self._prefetched.pop(persona, None)
        self._since.pop(persona, None)
        if found is not None and found[0] == (version, limit):
            return found[1]  # read with the lock, nothing written since
        self._flush()
        return self._log._persona_rows(persona, version, limit)

    def persona_since(
        self, persona: str, version: int, after: int, limit: int
    ) -> tuple[int | None, list[Event]]:
        found = self._since.pop(persona, None)
        self._prefetched.pop(persona, None)
        if found is not None:
            (v, n, read_after), stored, rows = found
            # the rows read with the lock after an earlier id hold every event after a
            # later one too (unless a page was full): another thread of this replica may
            # have left a newer state in the shared cache while this one waited for the
            # lock, and only the events after it are decoded
            if (v, n) == (version, limit) and read_after <= after and len(rows) < n:
                return stored, self._log._decode_tail(rows, after)
        self._flush()
        return self._log._persona_since_rows(persona, version, after, limit)

    def completions(self, persona: str, work_keys: Sequence[str]) -> dict[str, Completion]:
        keys = list(dict.fromkeys(work_keys))
        found: dict[str, Completion] = {}
        known = self._completed.get(persona)
        if known is not None:
            for key in [k for k in keys if k in known]:
                keys.remove(key)
                if (completion := known[key]) is not None:
                    found[key] = completion
        if keys:
            self._flush()
            rows = self._conn.execute(self._log._completions, (keys, self._log.topic, persona))
            found.update(self._log._completion_result(rows))
        return found

    def deliveries(self, persona: str, delivery_ids: Sequence[str]) -> dict[str, int]:
        ids = list(dict.fromkeys(delivery_ids))
        if not ids:
            return {}
        self._flush()
        rows = self._conn.execute(self._log._deliveries, (self._log.topic, persona, ids)).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def load_snapshot(self, persona: str) -> Snapshot | None:
        self._flush()
        row = self._conn.execute(
            sql.SQL(
                "SELECT event_id, version, state FROM {} WHERE topic = %s AND persona = %s"
            ).format(self._t("snapshots")),
            (self._log.topic, persona),
        ).fetchone()
        if row is None:
            return None
        return Snapshot(persona, int(row[0]), int(row[1]), row[2])

    def save_snapshot(self, snapshot: Snapshot) -> None:
        if not self._writable:
            raise EventLogError("save_snapshot needs a write transaction")
        self._prefetched, self._since = {}, {}
        self._pending.append(
            (
                self._log._save_snapshot,
                (
                    self._log.topic,
                    snapshot.persona,
                    snapshot.event_id,
                    snapshot.version,
                    Jsonb(snapshot.state),
                ),
            )
        )


class PostgresEventLog(EventLog):
    """PostgreSQL-backed log: ``postgresql://host/db?schema=name``."""

    backend = "postgresql"

    def __init__(self, url: str, *, topic: str = TOPIC, connect_timeout: int = 5) -> None:
        self.topic = topic
        self.url = url
        conninfo, self.schema = split_state_url(url)
        conninfo = session_conninfo(conninfo)
        self.channel = f"charter_events_{self.schema}"[:63]
        self._lock = _lock_key(self.schema, topic)
        self._listener: psycopg.Connection[Any] | None = None
        self._observed = 0  # the last id wait_for_append saw (while listening)
        self._kinds: set[str] = set()  # kinds notified since wait_for_append last returned
        self._conninfo = conninfo
        self._connect_timeout = connect_timeout
        try:
            self._conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=connect_timeout)
        except psycopg.Error as exc:
            raise EventLogError(f"cannot connect to {redact(url)}: {exc}".strip()) from exc
        try:
            self._create_schema()
        except psycopg.Error as exc:
            self._conn.close()
            raise EventLogError(f"cannot prepare schema {self.schema!r}: {exc}") from exc
        s = sql.Identifier(self.schema)
        self._take_lock = (
            sql.SQL("SELECT pg_advisory_xact_lock({})")
            .format(sql.Literal(self._lock))
            .as_string(self._conn)
        )
        # The last event's chain link by its whole primary key (a subquery, not a join):
        # with statistics gathered while the table was small, the planner estimated the
        # topic's rows at two and joined against every event of the topic, read under
        # the lock in every write transaction (190 pages a read at 2,500 events)
        self._read_head = (
            sql.SQL(
                "SELECT t.last_event_id, (SELECT e.chain FROM {s}.events e WHERE "
                "e.topic = t.topic AND e.event_id = t.last_event_id) FROM {s}.topics t "
                "WHERE t.topic = {topic}"
            )
            .format(s=s, topic=sql.Literal(topic))
            .as_string(self._conn)
        )
        self._begin_write = f"BEGIN; {self._take_lock}; {self._read_head}"
        self._copy_events = sql.SQL("COPY {}.events ({}) FROM STDIN").format(
            s, sql.SQL(_EVENT_COLUMNS)
        )
        self._set_last_sql = sql.SQL(
            "INSERT INTO {}.topics (topic, last_event_id) VALUES (%s, %s) "
            "ON CONFLICT (topic) DO UPDATE SET last_event_id = excluded.last_event_id"
        ).format(s)
        self._set_last = (
            sql.SQL("WITH last AS ({}) SELECT pg_notify(%s, %s)")
            .format(self._set_last_sql)
            .as_bytes(self._conn)
        )
        self._inserts: dict[tuple[int, int], bytes] = {}
        self._heads_upserts: dict[int, bytes] = {}
        # the topic's last id and the chain heads of some personas: one statement, read
        # with the lock by a write that names the personas it reads first
        self._read_head_and_heads = self._render(
            sql.SQL(
                "SELECT NULL::text, last_event_id, NULL::text FROM {s}.topics WHERE "
                "topic = %s UNION ALL SELECT persona, event_id, link FROM {s}.chain_heads "
                "WHERE topic = %s AND persona = ANY(%s::text[])"
            ).format(s=s)
        )
        # the chain heads of some personas (read with the lock, before their appends)
        self._read_heads = self._render(
            sql.SQL(
                "SELECT persona, event_id, link FROM {}.chain_heads WHERE topic = %s "
                "AND persona = ANY(%s::text[])"
            ).format(s)
        )
        self._client = psycopg.ClientCursor(self._conn)  # (binds values for _send)
        self._statements: dict[bytes, str] = {}  # prepared on this connection, by _send
        self._prepare_seq = itertools.count()
        self._reads: dict[tuple[bool, bool, bool], bytes] = {}
        self._save_snapshot = self._render(
            sql.SQL(
                "INSERT INTO {}.snapshots (topic, persona, event_id, version, state) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (topic, persona) DO UPDATE SET "
                "event_id = excluded.event_id, version = excluded.version, "
                "state = excluded.state"
            ).format(s)
        )
        # a persona's snapshot and the tail after it: one statement, so one round trip
        # and one snapshot of the database without a transaction around it
        self._load_persona_sql = sql.SQL(
            "SELECT * FROM ("
            "(SELECT 0 AS part, event_id, version, NULL::text AS persona, "
            "NULL::text AS persona_version, NULL::text AS actor, NULL::text AS kind, "
            "NULL::timestamptz AS occurred_at, state AS data "
            "FROM {s}.snapshots WHERE topic = %(topic)s AND persona = %(persona)s) "
            "UNION ALL "
            "(SELECT 1, event_id, NULL, persona, persona_version, actor, kind, occurred_at, "
            "payload FROM {s}.events WHERE topic = %(topic)s AND persona = %(persona)s "
            "AND event_id > COALESCE((SELECT event_id FROM {s}.snapshots WHERE "
            "topic = %(topic)s AND persona = %(persona)s AND version = %(version)s), 0) "
            "ORDER BY event_id LIMIT %(limit)s)) AS rows ORDER BY part, event_id"
        ).format(s=s)
        self._load_persona = self._render(self._load_persona_sql)
        # for a state held in memory: where the stored snapshot is (not its state) and
        # the persona's events after the held state, in one statement
        self._persona_since = self._render(
            sql.SQL(
                "SELECT * FROM ("
                "(SELECT 0 AS part, event_id, NULL::text AS persona, "
                "NULL::text AS persona_version, NULL::text AS actor, NULL::text AS kind, "
                "NULL::timestamptz AS occurred_at, NULL::text AS payload "
                "FROM {s}.snapshots WHERE topic = %(topic)s AND persona = %(persona)s "
                "AND version = %(version)s) "
                "UNION ALL "
                "(SELECT 1, event_id, persona, persona_version, actor, kind, occurred_at, "
                "payload::text FROM {s}.events WHERE topic = %(topic)s "
                "AND persona = %(persona)s AND event_id > %(after)s "
                "ORDER BY event_id LIMIT %(limit)s)) AS rows "
                "ORDER BY part, event_id"
            ).format(s=s)
        )
        self._read_last = self._render(
            sql.SQL("SELECT last_event_id FROM {}.topics WHERE topic = %s").format(s)
        )
        # the latest completion per key: one descent of the partial index per key (the
        # kind is a literal so that index applies). Not ``= ANY(keys)`` with DISTINCT ON:
        # its plan filtered every completion of the persona by key, read on each webhook
        self._completions = self._render(
            sql.SQL(
                "SELECT k.key, c.event_id, c.run_id, c.until FROM unnest(%s::text[]) AS k(key) "
                "CROSS JOIN LATERAL (SELECT event_id, payload->>'run_id' AS run_id, "
                "payload->>'duplicate_until' AS until FROM {}.events WHERE topic = %s AND "
                "persona = %s AND kind = {} AND payload->>'work_key' = k.key "
                "ORDER BY event_id DESC LIMIT 1) AS c"
            ).format(s, sql.Literal(COMPLETED_KIND))
        )

        self._deliveries = self._render(
            sql.SQL(
                "SELECT payload->>'delivery_id', min(event_id) FROM {}.events WHERE topic = %s "
                "AND persona = %s AND kind = {} AND payload->>'delivery_id' = ANY(%s::text[]) "
                "GROUP BY 1"
            ).format(s, sql.Literal(DELIVERY_KIND))
        )

    def _render(self, statement: sql.Composable) -> bytes:
        """A statement rendered once: psycopg would render a ``Composed`` on every call."""
        return statement.as_bytes(self._conn)

    def _read_query(self, persona: bool, limit: bool, kinds: bool = False) -> bytes:
        """Events after an id, in id order: of one persona, of some kinds, at most some."""
        found = self._reads.get((persona, limit, kinds))
        if found is None:
            query = sql.SQL(
                "SELECT event_id, persona, persona_version, actor, kind, occurred_at, payload "
                "FROM {}.events WHERE topic = %s AND event_id > %s"
            ).format(sql.Identifier(self.schema))
            if persona:
                query += sql.SQL(" AND persona = %s")
            if kinds:
                query += sql.SQL(" AND kind = ANY(%s)")
            query += sql.SQL(" ORDER BY event_id")
            if limit:
                query += sql.SQL(" LIMIT %s")
            found = self._reads[(persona, limit, kinds)] = self._render(query)
        return found

    def _persona_since_rows(
        self, persona: str, version: int, after: int, limit: int
    ) -> tuple[int | None, list[Event]]:
        check_limit(limit)
        params = {"topic": self.topic, "persona": persona, "version": version, "after": after,
                  "limit": limit}  # fmt: skip
        stored, rows = self._since_rows(self._conn.execute(self._persona_since, params))
        return stored, self._decode_tail(rows, after)

    @staticmethod
    def _since_rows(rows: Iterable[Any]) -> tuple[int | None, list[Any]]:
        """``_persona_since``'s stored snapshot id and its event rows (payloads as text)."""
        stored: int | None = None
        tail: list[Any] = []
        for r in rows:
            if r[0] == 0:
                stored = int(r[1])
            else:
                tail.append(r)
        return stored, tail

    def _decode_tail(self, rows: list[Any], after: int) -> list[Event]:
        loads = json.loads
        return [
            Event(int(r[1]), self.topic, r[2], r[5], r[6], loads(r[7]), r[4], r[3])
            for r in rows
            if r[1] > after
        ]

    def _events(self, rows: Iterable[Any]) -> list[Event]:
        return [Event(int(r[0]), self.topic, r[1], r[4], r[5], r[6], r[3], r[2]) for r in rows]

    @staticmethod
    def _completion_result(rows: Iterable[Any]) -> dict[str, Completion]:
        return {r[0]: Completion(r[0], int(r[1]), r[2], r[3]) for r in rows}

    def _persona_rows(
        self, persona: str, version: int, limit: int
    ) -> tuple[Snapshot | None, list[Event]]:
        check_limit(limit)
        params = {"topic": self.topic, "persona": persona, "version": version, "limit": limit}
        return self._persona_result(
            self._conn.execute(self._load_persona, params), persona, version
        )

    def _persona_result(
        self, rows: Iterable[Any], persona: str, version: int
    ) -> tuple[Snapshot | None, list[Event]]:
        snapshot: Snapshot | None = None
        tail: list[Event] = []
        for r in rows:
            if r[0] == 0:
                if int(r[2]) == version:
                    snapshot = Snapshot(persona, int(r[1]), int(r[2]), r[8])
            else:
                tail.append(Event(int(r[1]), self.topic, r[3], r[6], r[7], r[8], r[5], r[4]))
        return snapshot, tail

    def _send(self, statements: list[tuple[Any, Any]]) -> _Results:
        """Execute ``statements`` in order in one round trip: one simple query, the values
        bound on the client by psycopg's own quoting (``ClientCursor.mogrify``, libpq's
        escaping). The server stops at the first error and raises it; the statements after
        it do not run. (Psycopg's pipeline mode did the same with server-side binding at
        about twice the client's CPU per transaction: 750 against 390 us measured in
        isolation, and a replica's CPU is what limits its runs.) A statement whose
        ``params`` is ``None`` goes as its text; with values (``()`` for none) as an
        ``EXECUTE`` of a prepared statement. Each statement's result is
        :meth:`_Results.of` its index."""
        parts: list[str] = []
        results: list[int] = []  # which result is each statement's
        new: list[bytes] = []
        for query, params in statements:
            if params is None:
                parts.append(query.decode() if isinstance(query, bytes) else query)
            else:
                parts += self._prepared(query, params, new)
            results.append(len(parts) - 1)
        try:
            return _Results(self._conn.execute(";\n".join(parts).encode()), results)
        except BaseException:
            # a statement before a PREPARE failed and the server skipped the rest: which
            # were prepared is not known, so each is prepared again, under a new name
            for query in new:
                self._statements.pop(query, None)
            raise

    def _prepared(self, query: bytes, params: Any, new: list[bytes]) -> list[str]:
        """``query`` with ``params`` as ``EXECUTE`` of this connection's prepared statement
        (prepared first, in the same query, on its first use): the server parses and
        plans it once, not on every transaction."""
        names = _PLACEHOLDER.findall(query)
        if isinstance(params, dict):
            order = list(dict.fromkeys(n for n in names if n))
            values = [params[name.decode()] for name in order]
        else:
            order, values = [], list(params)
        found = self._statements.get(query)
        out: list[str] = []
        if found is None:
            count = iter(range(1, len(names) + 1))
            numbered = _PLACEHOLDER.sub(
                (lambda m: b"$%d" % (order.index(m.group(1)) + 1))
                if order
                else (lambda _: b"$%d" % next(count)),
                query,
            )
            found = self._statements[query] = f"charter_q{next(self._prepare_seq)}"
            new.append(query)
            out.append(f"PREPARE {found} AS {numbered.decode()}")
        out.append(f"EXECUTE {found}({self._literals(values)})" if values else f"EXECUTE {found}")
        return out

    def _literals(self, values: list[Any]) -> str:
        """``values`` quoted by psycopg (libpq's escaping), joined by commas; in chunks of
        at most :data:`_CHUNK`: psycopg keeps a parsed template of up to 50 parameters,
        and parsing ``%s, %s, ...`` again for each batch of inserts (9 per event) cost 4x
        the quoting itself."""
        mogrify = self._client.mogrify
        return ", ".join(
            mogrify(_TEMPLATES[len(chunk)], chunk)
            for chunk in (values[at : at + _CHUNK] for at in range(0, len(values), _CHUNK))
        )

    @staticmethod
    def _rows_heads(rows: Iterable[Any]) -> dict[str, tuple[int, str]]:
        return {r[0]: (int(r[1]), r[2]) for r in rows}

    def _heads_sql(self, heads: int) -> sql.Composed:
        values = sql.SQL(", ").join([sql.SQL("(%s, %s, %s, %s)")] * heads)
        return sql.SQL(
            "INSERT INTO {}.chain_heads (topic, persona, event_id, link) VALUES {} "
            "ON CONFLICT (topic, persona) DO UPDATE SET event_id = excluded.event_id, "
            "link = excluded.link"
        ).format(sql.Identifier(self.schema), values)

    def heads_statement(self, heads: int) -> bytes:
        """The heads of ``heads`` persona chains moved, as one statement."""
        found = self._heads_upserts.get(heads)
        if found is None:
            found = self._heads_upserts[heads] = self._render(self._heads_sql(heads))
        return found

    def insert_statement(self, rows: int, heads: int) -> bytes:
        """``rows`` events, the heads of ``heads`` persona chains, the topic's last id and
        the NOTIFY as one statement."""
        found = self._inserts.get((rows, heads))
        if found is None:
            values = sql.SQL(", ").join([sql.SQL("(%s, %s, %s, %s, %s, %s, %s, %s, %s)")] * rows)
            composed = sql.SQL(
                "WITH ev AS (INSERT INTO {}.events ({}) VALUES {}), hd AS ({}), last AS ({}) "
                "SELECT pg_notify(%s, %s)"
            ).format(
                sql.Identifier(self.schema),
                sql.SQL(_EVENT_COLUMNS),
                values,
                self._heads_sql(heads),
                self._set_last_sql,
            )
            found = self._inserts[(rows, heads)] = self._render(composed)
        return found

    def _create_schema(self) -> None:
        s = sql.Identifier(self.schema)
        with self._conn.transaction():
            # Serialise concurrent first-time creation (CREATE ... IF NOT EXISTS can race).
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
            self._conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.events ("
                    " topic TEXT NOT NULL, event_id BIGINT NOT NULL, persona TEXT NOT NULL,"
                    " persona_version TEXT, actor TEXT NOT NULL, kind TEXT NOT NULL,"
                    " occurred_at TIMESTAMPTZ NOT NULL, payload JSONB NOT NULL, chain TEXT,"
                    " PRIMARY KEY (topic, event_id))"
                ).format(s)
            )
            # a log from before the hash chain: the chain starts with its next event
            self._conn.execute(
                sql.SQL("ALTER TABLE {}.events ADD COLUMN IF NOT EXISTS chain TEXT").format(s)
            )
            self._conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS events_by_persona ON {}.events "
                    "(topic, persona, event_id)"
                ).format(s)
            )
            # the duplicate window's lookup (LogTransaction.completions)
            self._conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS events_completed_by_key ON {}.events "
                    "(topic, persona, (payload->>'work_key'), event_id) WHERE kind = {}"
                ).format(s, sql.Literal(COMPLETED_KIND))
            )
            # a redelivered webhook's lookup (LogTransaction.deliveries)
            self._conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS events_delivery_by_id ON {}.events "
                    "(topic, persona, (payload->>'delivery_id')) WHERE kind = {}"
                ).format(s, sql.Literal(DELIVERY_KIND))
            )
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.topics ("
                    " topic TEXT PRIMARY KEY, last_event_id BIGINT NOT NULL)"
                ).format(s)
            )
            # each persona chain's head, and where persona chains start (charter.runtime.audit)
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.chain_heads ("
                    " topic TEXT NOT NULL, persona TEXT NOT NULL, event_id BIGINT NOT NULL,"
                    " link TEXT NOT NULL, PRIMARY KEY (topic, persona))"
                ).format(s)
            )
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.chain_format ("
                    " topic TEXT PRIMARY KEY, chains_from BIGINT NOT NULL, anchor TEXT)"
                ).format(s)
            )
            self.chains_from, self.anchor = self._chain_format()
            self._conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.snapshots ("
                    " topic TEXT NOT NULL, persona TEXT NOT NULL, event_id BIGINT NOT NULL,"
                    " version INTEGER NOT NULL, state JSONB NOT NULL,"
                    " PRIMARY KEY (topic, persona))"
                ).format(s)
            )

    def _chain_format(self) -> tuple[int, str | None]:
        """Where persona chains start (under the schema's lock). A log written before them
        is migrated in place: its events keep the topic-wide chain, and every persona
        chain starts from that chain's head (see charter.runtime.audit)."""
        s = sql.Identifier(self.schema)
        row = self._conn.execute(
            sql.SQL("SELECT chains_from, anchor FROM {}.chain_format WHERE topic = %s").format(s),
            (self.topic,),
        ).fetchone()
        if row is not None:
            return int(row[0]), row[1]
        row = self._conn.execute(
            sql.SQL(
                "SELECT t.last_event_id, (SELECT e.chain FROM {s}.events e WHERE "
                "e.topic = t.topic AND e.event_id = t.last_event_id) FROM {s}.topics t "
                "WHERE t.topic = %s"
            ).format(s=s),
            (self.topic,),
        ).fetchone()
        head = (int(row[0]), row[1]) if row else (0, None)
        self._conn.execute(
            sql.SQL("INSERT INTO {}.chain_format VALUES (%s, %s, %s)").format(s),
            (self.topic, *head),
        )
        return head

    def describe(self) -> str:
        return redact(self.url)

    @contextmanager
    def write(
        self, *, prefetch: Prefetch | Sequence[Prefetch] | None = None
    ) -> Iterator[LogTransaction]:
        txn = _PgTxn(self, writable=True)
        # one round trip: BEGIN, the topic's lock, then the head (and the prefetched
        # personas), read by statements that start after the lock is held (READ COMMITTED
        # takes a snapshot per statement), so they see every earlier commit
        ahead = [prefetch] if isinstance(prefetch, Prefetch) else list(prefetch or ())
        try:
            if not ahead:  # simple query protocol, several statements
                cur = self._conn.execute(self._begin_write)
                cur.nextset()
                cur.nextset()
                head = cur.fetchone()
            else:
                # the head and the chain heads of the personas it is about to write
                personas = list(dict.fromkeys(one.persona for one in ahead))
                statements: list[tuple[Any, Any]] = [
                    ("BEGIN", None),
                    (self._take_lock.encode(), ()),  # (prepared: planned once)
                    (self._read_head_and_heads, (self.topic, self.topic, personas)),
                ]
                for one in ahead:
                    params = {"topic": self.topic, "persona": one.persona,
                              "version": one.version, "after": one.after,
                              "limit": one.limit}  # fmt: skip
                    statements.append(
                        (self._load_persona if one.after is None else self._persona_since, params)
                    )
                    if one.work_keys:
                        keys = list(dict.fromkeys(one.work_keys))
                        statements.append((self._completions, (keys, self.topic, one.persona)))
                results = self._send(statements)
                head, found = None, {}
                for r in results.of(2):
                    if r[0] is None:
                        head = (r[1], None)
                    else:
                        found[r[0]] = (int(r[1]), r[2])
                txn._take_heads(found, personas)
                at = 3
                for one in ahead:
                    self._take_ahead(txn, one, results, at)
                    at += 2 if one.work_keys else 1
            txn._last = (int(head[0]), head[1]) if head else (0, None)
            yield txn
            # the writes still queued and the COMMIT: one round trip
            self._send([*txn._pending, ("COMMIT", None)])
            txn._pending = []
        except BaseException:
            self._rollback()
            raise
        self.commits += 1

    def _take_ahead(self, txn: _PgTxn, one: Prefetch, results: _Results, at: int) -> None:
        """Keep what ``one`` read in the first round trip (``results`` from index ``at``)
        for the transaction to take when it asks."""
        persona, version, limit = one.persona, one.version, one.limit
        rows = results.of(at)
        if one.after is None:
            txn._prefetched[persona] = (
                (version, limit),
                self._persona_result(rows, persona, version),
            )
        else:
            stored, tail = self._since_rows(rows)
            txn._since[persona] = ((version, limit, one.after), stored, tail)
        if one.work_keys:
            known: dict[str, Completion | None] = dict.fromkeys(one.work_keys)
            known.update(self._completion_result(results.of(at + 1)))
            txn._completed[persona] = known

    @contextmanager
    def read_view(self) -> Iterator[LogTransaction]:
        # one snapshot for every read of the view, opened in one round trip
        self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        try:
            yield _PgTxn(self, writable=False)
        except BaseException:
            self._rollback()
            raise
        self._conn.execute("COMMIT")

    def _rollback(self) -> None:
        if not self._conn.closed:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("ROLLBACK")

    def _listen(self) -> psycopg.Connection[Any]:
        if self._listener is None:
            self._observed = 0
            self._listener = psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=self._connect_timeout
            )
            self._listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        return self._listener

    # Single reads outside a transaction: one statement sees one snapshot, so they need
    # no BEGIN/COMMIT round trips (events are append-only and committed in id order).

    def last_event_id(self) -> int:
        row = self._conn.execute(self._read_last, (self.topic,)).fetchone()
        return int(row[0]) if row else 0

    def read(
        self,
        *,
        after: int = 0,
        persona: str | None = None,
        limit: int | None = None,
        kinds: Collection[str] | None = None,
    ) -> list[Event]:
        txn = _PgTxn(self, writable=False)
        return txn.read(after=after, persona=persona, limit=limit, kinds=kinds)

    def load_persona(
        self, persona: str, version: int, limit: int
    ) -> tuple[Snapshot | None, list[Event]]:
        return self._persona_rows(persona, version, limit)

    def persona_since(
        self, persona: str, version: int, after: int, limit: int
    ) -> tuple[int | None, list[Event]]:
        return self._persona_since_rows(persona, version, after, limit)

    def wait_for_append(self, after_event_id: int, timeout: float) -> bool:
        fresh = self._listener is None
        listener = self._listen()  # listen first, then check: no append can slip between
        deadline = time.monotonic() + max(0.0, timeout)
        # Every event after the last id this method saw was committed while the listener
        # listened, so its notify is queued or on its way (each one taken is followed by
        # a check): a caller already past that id waits for a notify before asking.
        check = fresh or after_event_id < self._observed or timeout <= 0
        while True:
            remaining = deadline - time.monotonic()
            if check or remaining <= 0:
                self._observed = max(self._observed, self.last_event_id())
                self.last_seen = self._observed
                if self._observed > after_event_id:
                    self.kinds_seen, self._kinds = None, set()  # (the query tells no kinds)
                    return True
                if remaining <= 0:
                    return False
            check = False
            # (every notify already received is taken with the first)
            for note in listener.notifies(timeout=remaining, stop_after=1):
                # A commit's payload is {"id": its last id, "topic", "kinds"}, and every
                # id up to it is committed (ids are assigned under the lock) and notified
                # in commit order: no query needed, and the kinds say what happened since
                # the last return. The channel is the schema's, so a notify may be another
                # topic's (ignored); anything else (a writer of an older version) is
                # answered by a query.
                sent = _notice(note.payload)
                if sent is None:
                    check = True
                elif sent[0] == self.topic:
                    self._observed = max(self._observed, sent[1])
                    self._kinds.update(sent[2])
            if not check and self._observed > after_event_id:
                self.last_seen = self._observed
                self.kinds_seen, self._kinds = frozenset(self._kinds), set()
                return True

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._conn.close()

    def drop_schema(self) -> None:
        """Remove every table of this log's schema (tests and benchmarks clean up with it)."""
        self._conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
        )
