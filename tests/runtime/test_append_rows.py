"""The batch append path: rows built directly, COPY for large PostgreSQL batches, one
executemany on SQLite; unusual text survives, ids and order hold, a failed batch leaves
nothing behind (issue 15)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg import sql

from charter.runtime import EventLog, NewEvent, PostgresEventLog, SqliteEventLog
from charter.runtime.audit import chain_hash, verify
from charter.runtime.postgres_log import COPY_MIN_ROWS, split_state_url
from charter.runtime.rows import build_rows
from charter.runtime.sqlite_log import DB_FILENAME

AT = datetime(2026, 4, 24, 12, 0, tzinfo=UTC)

#: text that breaks naive COPY/JSON handling: COPY's own delimiters and escapes, JSON's
#: escapes, line separators, astral-plane unicode, combining marks (no NUL: PostgreSQL
#: text cannot hold one)
AWKWARD = [
    "tab\there",
    "new\nline\r\nand CR\r",
    "back\\slash \\N \\. \\\\t",
    "quote \" and ' and `",
    "\\.",
    "é ß ж 漢字 🎉 \U0001f600 e\u0301",
    "\u2028\u2029 line separators, \x01\x1f control, \x7f DEL",
    "",
    " leading and trailing ",
    "null",
]


def awkward_event(i: int, **extra: Any) -> NewEvent:
    text = AWKWARD[i % len(AWKWARD)]
    return NewEvent(
        f"p{text}" if i % 3 == 0 else "p",
        f"persona.test.{i % 4}",
        AT + timedelta(microseconds=i * 7),
        {
            "i": i,
            "text": text,
            "nested": {"z": [text, 1.5, None, True], "a": {text or "k": text}},
            "float": 0.1 + 0.2,
            **extra,
        },
        actor=text or "charter",
        persona_version=None if i % 2 else f"v{text}",
    )


def test_rows_chain_like_the_audit_canonical_form() -> None:
    events = [awkward_event(i) for i in range(40)]
    events.append(NewEvent("p", "k", datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5)))))
    starts = {e.persona: f"prior-{e.persona}" for e in events}
    heads = dict(starts)
    out, rows = build_rows('topic "x"', 41, heads, events)
    assert len(starts) > 1  # several personas, each chained on its own
    previous: dict[str, str] = dict(starts)
    for event, row in zip(out, rows, strict=True):
        previous[event.persona] = chain_hash(previous[event.persona], event)
        assert row[-1] == previous[event.persona]
        assert row[1] == event.event_id
    assert heads == previous  # moved to each persona's last link
    assert [e.event_id for e in out] == list(range(42, 42 + len(events)))
    # an empty head starts the chain, as chain_hash(None, ...) does
    (first,), (row,) = build_rows("t", 0, {events[0].persona: ""}, events[:1])
    assert row[-1] == chain_hash(None, first)


def test_a_refused_payload_leaves_the_heads_as_they_were() -> None:
    heads = {"p": "h"}
    bad = NewEvent("p", "k", AT, {"a": 1})
    object.__setattr__(bad, "payload", {"a": object()})
    with pytest.raises(TypeError):
        build_rows("t", 0, heads, [NewEvent("p", "k", AT, {"b": 2}), bad])
    assert heads == {"p": "h"}


def test_the_callers_payload_is_not_shared() -> None:
    payload: dict[str, Any] = {"a": 1}
    (event,), _ = build_rows("t", 0, {"p": ""}, [NewEvent("p", "k", AT, payload)])
    payload["a"] = 2
    assert event.payload == {"a": 1}


@pytest.mark.parametrize("size", [1, COPY_MIN_ROWS - 1, COPY_MIN_ROWS, 250])
def test_batches_of_awkward_text_round_trip_in_order(log: EventLog, size: int) -> None:
    # below COPY_MIN_ROWS PostgreSQL takes the one-statement INSERT, from it on COPY
    log.append([awkward_event(1000)])
    batch = [awkward_event(i) for i in range(size)]
    appended = log.append(batch)
    assert [e.event_id for e in appended] == list(range(2, size + 2))
    stored = log.read(after=1)
    assert stored == appended
    for new, got in zip(batch, stored, strict=True):
        assert (got.persona, got.kind, got.actor, got.persona_version) == (
            new.persona, new.kind, new.actor, new.persona_version,
        )  # fmt: skip
        assert got.payload == new.payload
        assert got.occurred_at == new.occurred_at
    assert log.last_event_id() == size + 1
    report = verify(log)
    assert report.ok, report.problems
    assert report.chained == size + 1


def test_a_large_json_payload_goes_through_copy(log: EventLog) -> None:
    big = {
        "blob": "x\t\n\\" * 50_000,
        "items": [{"n": n, "s": AWKWARD[n % 10]} for n in range(5000)],
    }
    batch = [NewEvent("p", "k", AT, {**big, "i": i}) for i in range(COPY_MIN_ROWS + 1)]
    log.append(batch)
    stored = log.read()
    assert len(stored) == len(batch)
    assert stored[-1].payload == {**big, "i": COPY_MIN_ROWS}
    assert verify(log).ok


def test_consecutive_batches_in_one_transaction_keep_one_chain(log: EventLog) -> None:
    with log.write() as txn:
        first = txn.append([awkward_event(i) for i in range(3)])
        second = txn.append([awkward_event(i) for i in range(3, 3 + COPY_MIN_ROWS)])
        assert txn.last_event_id() == second[-1].event_id
    assert [e.event_id for e in first + second] == list(range(1, 4 + COPY_MIN_ROWS))
    assert verify(log).ok


def _plant_row(log: EventLog, event_id: int) -> None:
    """A row at ``event_id`` written behind the log's back: the batch will collide."""
    row = ("persona.runtime.events", event_id, "p", None, "x", "k", "2026-04-24T12:00:00Z")
    if isinstance(log, PostgresEventLog):
        conninfo, schema = split_state_url(log.url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.events (topic, event_id, persona, persona_version, actor, "
                    "kind, occurred_at, payload) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                ).format(sql.Identifier(schema)),
                (*row, "{}"),
            )
    else:
        assert isinstance(log, SqliteEventLog)
        with sqlite3.connect(log.path) as conn:
            conn.execute(
                "INSERT INTO events (topic, event_id, persona, persona_version, actor, kind, "
                "occurred_at, payload) VALUES (?, ?, ?, ?, ?, ?, ?, '{}')",
                row,
            )


def _count(log: EventLog) -> int:
    if isinstance(log, PostgresEventLog):
        conninfo, schema = split_state_url(log.url)
        with psycopg.connect(conninfo) as conn:
            query = sql.SQL("SELECT count(*) FROM {}.events").format(sql.Identifier(schema))
            row = conn.execute(query).fetchone()
    else:
        assert isinstance(log, SqliteEventLog)
        with sqlite3.connect(log.path) as conn:
            row = conn.execute("SELECT count(*) FROM events").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("size", [5, COPY_MIN_ROWS + 10])
def test_a_failed_batch_leaves_nothing_half_written(log: EventLog, size: int) -> None:
    log.append([awkward_event(0)])
    _plant_row(log, 1 + size - 2)  # collides with the batch's second-to-last row
    with pytest.raises((psycopg.Error, sqlite3.Error)):
        log.append([awkward_event(i) for i in range(size)])
    assert log.last_event_id() == 1
    assert _count(log) == 2  # the first event and the planted row, nothing of the batch
    assert [e.event_id for e in log.read()] == [1, size - 1]
    # the connection is usable again and the next writer starts right after event 1
    with pytest.raises((psycopg.Error, sqlite3.Error)):
        log.append([awkward_event(i) for i in range(size)])
    (next_event,) = log.append([awkward_event(99)])
    assert next_event.event_id == 2


def test_a_payload_the_database_refuses_leaves_nothing(log: EventLog) -> None:
    # a lone surrogate is valid to json.dumps (escaped) but is not text: refused while the
    # rows are built, before anything is sent
    log.append([awkward_event(0)])
    batch = [awkward_event(i) for i in range(COPY_MIN_ROWS + 5)]
    batch[COPY_MIN_ROWS] = NewEvent("p", "k", AT, {"bad": "\ud800"})
    with pytest.raises(UnicodeEncodeError):
        log.append(batch)
    assert log.last_event_id() == 1
    assert _count(log) == 1


def test_postgres_nul_in_json_is_refused_by_copy_and_rolled_back(
    state_location: dict[str, str], backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("PostgreSQL's jsonb refuses \\u0000; SQLite stores it")
    log = PostgresEventLog(state_location["url"])
    try:
        log.append([awkward_event(0)])
        batch = [awkward_event(i) for i in range(COPY_MIN_ROWS + 5)]
        batch[-1] = NewEvent("p", "k", AT, {"nul": "a\x00b"})
        with pytest.raises(psycopg.Error):
            log.append(batch)
        assert log.last_event_id() == 1
        assert _count(log) == 1
        assert log.append([awkward_event(1)])[0].event_id == 2
        assert verify(log).ok
    finally:
        log.close()


def test_sqlite_stores_compact_sorted_utf8_json(tmp_path: Any) -> None:
    log = SqliteEventLog(tmp_path)
    try:
        log.append([NewEvent("p", "k", AT, {"b": "é", "a": [1, {"d": 1, "c": 2}]})])
    finally:
        log.close()
    with sqlite3.connect(tmp_path / DB_FILENAME) as conn:
        row = conn.execute("SELECT payload FROM events").fetchone()
    assert row == ('{"a":[1,{"c":2,"d":1}],"b":"é"}',)


def test_floats_jsonb_would_rewrite_are_stored_as_it_reads_them(log: EventLog) -> None:
    # PostgreSQL's jsonb reads 1e+16 back as an integer and -0.0 as 0.0: the chain must
    # hash what every backend returns, or audit verify fails (it did on PostgreSQL)
    payload = {
        "big": 1e16,
        "huge": 1e300,
        "neg0": -0.0,
        "list": [2.5e20, 1e23, 1.5e-7, 0.1],
        "nested": {"x": 1.2345678901234568e17},
        "text": "one+two e+3 -0.0",
    }
    log.append([NewEvent("p", "k", AT, payload)])
    stored = log.read(after=0)[-1].payload
    assert stored["big"] == 10**16 and isinstance(stored["big"], int)
    assert stored["huge"] == 10**300
    assert stored["neg0"] == 0.0 and str(stored["neg0"]) == "0.0"
    assert stored["list"] == [250000000000000000000, 10**23, 1.5e-7, 0.1]
    assert stored["nested"]["x"] == 123456789012345680
    assert stored["text"] == "one+two e+3 -0.0"
    assert verify(log).ok
