"""The PostgreSQL log's hot statements stay cheap when the planner's statistics are stale.

A new log's ``events`` table is analysed while it is small (or never); until autovacuum
analyses it again, the planner believes a topic has a couple of rows. The head read under
the write lock used to join against every event of the topic (190 pages a read at 2,500
events, in every write transaction), and the duplicate window's lookup filtered every
completion of the persona. Each statement is checked here by the pages it touches, with
the plan PostgreSQL makes for the values (custom) and the one it caches for a prepared
statement (generic), on a table analysed at 5 events and grown to 3,000.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from runtime_support import AT0, new_pg_log

from charter.run.serve import WAKE_KINDS
from charter.runtime import NewEvent, PostgresEventLog
from charter.runtime.audit import verify
from charter.runtime.log import COMPLETED_KIND

PERSONA = "triager"
EVENTS = 3000
#: pages a lookup may touch: an index descent and a heap page or two, whatever the size
MAX_PAGES = 12
#: what a replica's watcher reads after each commit that could wake a worker
WATCHED = sorted(WAKE_KINDS)
_TYPES = {str: "text", int: "bigint", list: "text[]"}


def _statements(log: PostgresEventLog) -> dict[str, tuple[bytes, tuple[Any, ...]]]:
    """The statements under test, with the values they are run with."""
    after = EVENTS - 6
    return {
        "head": (log._read_head.encode(), ()),
        "heads": (log._read_heads, (log.topic, [PERSONA, "other"])),
        "head_and_heads": (log._read_head_and_heads, (log.topic, log.topic, [PERSONA])),
        "absent": (log._completions, (["absent"], log.topic, PERSONA)),
        "three": (log._completions, (["k2997", "absent", "k3"], log.topic, PERSONA)),
        "tail": (log._read_query(True, True), (log.topic, after, PERSONA, 100)),
        "since": _positional(
            log._persona_since,
            {"topic": log.topic, "persona": PERSONA, "version": 2, "after": after, "limit": 100},
        ),
        "kinds": (log._read_query(False, False, True), (log.topic, after, WATCHED)),
    }


def _positional(statement: bytes, named: dict[str, Any]) -> tuple[bytes, tuple[Any, ...]]:
    """A statement with ``%(name)s`` placeholders as one with ``%s`` and its values."""
    names = re.findall(rb"%\((\w+)\)s", statement)
    return re.sub(rb"%\(\w+\)s", b"%s", statement), tuple(named[n.decode()] for n in names)


@pytest.fixture(scope="module")
def grown() -> Iterator[PostgresEventLog]:
    """A log whose statements were planned at 5 events (a replica's connection prepares
    a statement on its sixth run and keeps its plan), then grown to 3,000 events."""
    with new_pg_log() as log:
        log.append([_event(i) for i in range(5)])
        conn = log._conn
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for name, (statement, params) in _statements(log).items():
            text = _numbered(statement.decode())
            types = ", ".join(_TYPES[type(value)] for value in params)
            conn.execute(f"PREPARE {name}{f'({types})' if types else ''} AS {text}")
            conn.execute(_execute(name, params))  # planned and cached now
        conn.execute("RESET plan_cache_mode")
        for start in range(5, EVENTS, 500):
            log.append([_event(i) for i in range(start, min(EVENTS, start + 500))])
        yield log


def _numbered(statement: str) -> str:
    """``%s`` placeholders as ``$1``, ``$2``... (for PREPARE)."""
    count = iter(range(1, 100))
    return re.sub("%s", lambda _: f"${next(count)}", statement)


def _execute(name: str, params: tuple[Any, ...]) -> sql.Composable:
    """``EXECUTE name(...)`` with the values as literals (a utility statement's arguments
    cannot be bound)."""
    if not params:
        return sql.SQL("EXECUTE {}").format(sql.Identifier(name))
    values = sql.SQL(", ").join(sql.Literal(value) for value in params)
    return sql.SQL("EXECUTE {}({})").format(sql.Identifier(name), values)


def _event(i: int) -> NewEvent:
    at = AT0 + timedelta(seconds=i)
    if i % 3 == 0:
        payload: dict[str, Any] = {"work_key": f"k{i}", "run_id": f"run_{i}"}
        return NewEvent(PERSONA, COMPLETED_KIND, at, payload)
    persona = PERSONA if i % 3 == 1 else "other"
    return NewEvent(persona, "persona.run.started", at, {"run_id": f"run_{i}"})


def _pages(log: PostgresEventLog, name: str) -> tuple[int, int]:
    """Pages touched by the statement as planned now, and by the plan cached at 5 events."""
    statement, params = _statements(log)[name]
    explain = b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
    now = _plan(log._conn.execute(explain + statement, params).fetchone())
    log._conn.execute("SET plan_cache_mode = force_generic_plan")
    try:
        query = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + _execute(name, params)
        cached = _plan(log._conn.execute(query).fetchone())
    finally:
        log._conn.execute("RESET plan_cache_mode")
    return _touched(now), _touched(cached)


def _touched(plan: dict[str, Any]) -> int:
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def _plan(row: Any) -> dict[str, Any]:
    data = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return dict(data[0]["Plan"])


def test_the_head_read_under_the_lock_touches_a_few_pages(grown: PostgresEventLog) -> None:
    now, cached = _pages(grown, "head")
    assert now <= MAX_PAGES and cached <= MAX_PAGES, (now, cached)
    with grown.write() as txn:  # and it still reads the right head
        assert txn.last_event_id() == EVENTS
        chain = grown._conn.execute(
            f'SELECT chain FROM "{grown.schema}".events WHERE event_id = %s', (EVENTS,)
        ).fetchone()
        assert txn._last == (EVENTS, chain[0])  # type: ignore[attr-defined,index]


def test_the_persona_chain_heads_read_with_the_lock_touch_a_few_pages(
    grown: PostgresEventLog,
) -> None:
    for name in ("heads", "head_and_heads"):
        now, cached = _pages(grown, name)
        assert now <= MAX_PAGES and cached <= MAX_PAGES, (name, now, cached)
    with grown.read_view() as view:
        heads = view.chain_heads()
    assert sorted(heads) == ["other", PERSONA]
    assert heads["other"][0] == EVENTS and heads[PERSONA][0] == EVENTS - 1  # (_event)


@pytest.mark.parametrize(
    ("name", "keys"), [("absent", ["absent"]), ("three", ["k2997", "absent", "k3"])]
)
def test_the_duplicate_window_lookup_touches_a_few_pages_per_key(
    grown: PostgresEventLog, name: str, keys: list[str]
) -> None:
    now, cached = _pages(grown, name)
    assert now <= MAX_PAGES * len(keys) and cached <= MAX_PAGES * len(keys), (now, cached)
    with grown.read_view() as view:
        found = view.completions(PERSONA, keys)
    assert {k: c.event_id for k, c in found.items()} == {
        k: int(k[1:]) + 1 for k in keys if k != "absent"
    }


@pytest.mark.parametrize("name", ["tail", "since", "kinds"])
def test_reads_after_an_id_touch_pages_for_what_they_return(
    grown: PostgresEventLog, name: str
) -> None:
    now, cached = _pages(grown, name)
    assert now <= MAX_PAGES and cached <= MAX_PAGES, (now, cached)


@pytest.fixture
def fresh() -> Iterator[PostgresEventLog]:
    with new_pg_log() as log:
        yield log


def test_a_statement_is_prepared_again_when_its_first_query_failed(
    fresh: PostgresEventLog,
) -> None:
    """A write transaction's statements go as one query, each prepared on its first use in
    that same query. When a statement before the PREPARE fails, the server skips the rest:
    the statement is then prepared again, not executed by a name the server never saw."""
    read = fresh._read_query(False, True)
    with pytest.raises(psycopg.errors.DivisionByZero):
        fresh._send([("SELECT 1/0", None), (read, (fresh.topic, 0, 10))])
    fresh.append([_event(0)])
    rows = fresh._send([(read, (fresh.topic, 0, 10))]).of(0).fetchall()
    assert [int(r[0]) for r in rows] == [1]
    with fresh.write() as txn:  # and writes go on (the insert is prepared on first use)
        txn.append([_event(1)])
    assert fresh.last_event_id() == 2


def test_values_reach_the_log_as_given(fresh: PostgresEventLog) -> None:
    """Values are bound into the query by psycopg's quoting, not by the server: quotes,
    backslashes, ``$1`` and ``%s`` lookalikes, non-ASCII text and nested JSON come back
    exactly (and hash to what ``audit`` verifies)."""
    tricky = {
        "work_key": 'it\'s \\ a "key" $1 %s %(x)s; DROP TABLE x; --',
        "nested": {"list": [1, 2.5, None, True, "é 漢字 🙂"], "empty": {}},
        "newline": "a\nb\tc",
    }
    with fresh.write() as txn:
        txn.append([NewEvent(PERSONA, "persona.note", AT0, tricky)])
    # a batch: its values are quoted in several chunks (``_literals``), 9 per event
    batch = [{**tricky, "n": n, "work_key": f"{tricky['work_key']} {n}"} for n in range(12)]
    with fresh.write() as txn:
        txn.append([NewEvent(PERSONA, "persona.note", AT0, p) for p in batch])
    assert [e.payload for e in fresh.read()] == [tricky, *batch]
    report = verify(fresh)
    assert report.ok and report.chained == 13, report.problems
