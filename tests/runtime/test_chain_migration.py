"""Persona chains (issue 36): a log of the old topic-wide format is migrated in place.

A log of several thousand events, written as charter wrote it before persona chains (one
chain over the topic, version 1 checkpoints: ``legacy_log``), is verified before it is
opened, opened by today's code (which migrates it), verified again, written to by several
personas, checkpointed and verified with the key; tampering on either side of the
migration is still named. Then a log born with persona chains: each persona's chain is
its own, and a persona's removed tail is found by its recorded head.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from legacy_log import (
    AT,
    legacy_events,
    verify_legacy,
    with_v1_checkpoint,
    write_postgres,
    write_sqlite,
)
from runtime_support import pg_unreachable, pg_url

from charter.runtime import EventLog, NewEvent, PostgresEventLog, SqliteEventLog
from charter.runtime.audit import chain_hash, chain_status, verify
from charter.runtime.signing import checkpoint

COUNT = 3000


@pytest.fixture
def key() -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


@pytest.fixture
def legacy(
    backend: str, tmp_path: Path, key: Any
) -> Iterator[tuple[Callable[[], EventLog], str, Callable[..., None]]]:
    """A legacy log of ``COUNT`` events and a v1 checkpoint: (opener, head link, sql)."""
    events = with_v1_checkpoint(legacy_events(COUNT), key)
    if backend == "sqlite":
        state = tmp_path / "state"
        head = write_sqlite(state, events)

        def run_sql(statement: str, params: tuple[Any, ...] = ()) -> None:
            conn = sqlite3.connect(state / "events.sqlite3")
            conn.execute(statement.format(events="events", heads="chain_heads"), params)
            conn.commit()
            conn.close()

        yield (lambda: SqliteEventLog(state)), head, run_sql
        return
    url = pg_url()
    try:
        head = write_postgres(url, events)
    except Exception as exc:  # the server is not there: skipped (failed under CI)
        pg_unreachable(exc)
        raise
    probe = PostgresEventLog(url)
    schema = probe.schema

    def run_pg(statement: str, params: tuple[Any, ...] = ()) -> None:
        with probe._conn.transaction():
            probe._conn.execute(
                statement.replace("?", "%s").format(
                    events=f'"{schema}".events', heads=f'"{schema}".chain_heads'
                ),
                params,
            )

    try:
        yield (lambda: PostgresEventLog(url)), head, run_pg
    finally:
        probe.drop_schema()
        probe.close()


def _all_rows(log: EventLog) -> list[tuple[Any, str | None]]:
    with log.read_view() as txn:
        events = txn.read()
        chains = dict(txn.chains())
    return [(e, chains[e.event_id]) for e in events]


def test_a_legacy_log_is_migrated_in_place_and_verifies_before_and_after(
    legacy: tuple[Callable[[], EventLog], str, Callable[..., None]], key: Any
) -> None:
    opener, head, run_sql = legacy
    log = opener()  # opening migrates: the old chain is kept, persona chains start after
    try:
        rows = _all_rows(log)
        # before: the topic-wide chain as the old verifier checked it (the rows unchanged)
        assert verify_legacy(rows) == COUNT + 1
        assert log.chains_from == COUNT + 1 and log.anchor == rows[-1][1]
        report = verify(log, key=key.public_key())
        assert report.ok, report.problems
        assert report.chained == COUNT + 1 and report.legacy_through == COUNT + 1
        assert report.signatures is not None and report.signatures["valid"] == 1  # v1 kept
        assert head == rows[-1][1]

        # after: several personas write, each on its own chain from the old head
        for i in range(30):
            at = AT + timedelta(hours=1)
            payload = {"i": i, "cost_usd": 0.1 * i}
            log.append([NewEvent(f"worker{i % 3}", "persona.run.completed", at, payload)])
        first = rows[-1][0].event_id + 1
        (new_first,) = log.read(after=first - 1, limit=1)
        assert _link(log, new_first.event_id) == chain_hash(log.anchor, new_first)
        signed = checkpoint(log, key, at=AT + timedelta(hours=2))
        assert signed["v"] == 2 and signed["chains"] == 3
        log.append([NewEvent("worker1", "persona.run.completed", AT + timedelta(hours=3))])
        report = verify(log, key=key.public_key())
        assert report.ok, report.problems
        assert report.chains == 4  # three workers and the checkpoints' own chain
        assert report.signatures is not None and report.signatures["valid"] == 2
        assert chain_status(log, [first, first + 3, first + 6]) == "intact (3 events)"
        # a second open of a migrated log keeps where its persona chains start
        again = opener()
        try:
            assert (again.chains_from, again.anchor) == (log.chains_from, log.anchor)
        finally:
            again.close()

        # hostile, before the migration point: an old event edited is named
        run_sql("UPDATE {events} SET actor = 'mallory' WHERE event_id = 1234")
        assert verify(log).first_bad_event_id == 1234
        run_sql("UPDATE {events} SET actor = 'charter' WHERE event_id = 1234")
        # ...and after it: a persona chain's event edited is named, and only it
        bad = first + 4
        run_sql("UPDATE {events} SET kind = 'x.edited' WHERE event_id = ?", (bad,))
        problems = verify(log).problems
        assert [p["event_id"] for p in problems] == [bad]
    finally:
        log.close()


def _link(log: EventLog, event_id: int) -> str | None:
    with log.read_view() as txn:
        return dict(txn.chains(after=event_id - 1, limit=1)).get(event_id)


def test_each_persona_has_its_own_chain_and_its_removed_tail_is_found(
    log: EventLog, log_factory: Callable[[], EventLog]
) -> None:
    assert log.chains_from == 0 and log.anchor is None  # born with persona chains
    other = log_factory()  # a second writer: chains continue across connections
    try:
        for i in range(12):
            first, second = f"p{i % 3}", f"p{(i + 1) % 3}"
            (log if i % 2 else other).append(
                [
                    NewEvent(first, "persona.work.queued", AT, {"i": i}),
                    NewEvent(second, "persona.work.queued", AT, {"j": i}),
                ]
            )
    finally:
        other.close()
    events = log.read()
    previous: dict[str, str] = {}
    for event in events:  # each link covers its own persona's previous link only
        previous[event.persona] = chain_hash(previous.get(event.persona), event)
        assert _link(log, event.event_id) == previous[event.persona]
    with log.read_view() as txn:
        heads = txn.chain_heads()
    last = {e.persona: e.event_id for e in events}
    assert heads == {p: (last[p], previous[p]) for p in last}
    report = verify(log)
    assert report.ok and report.chains == 3, report.problems

    # p1's last event removed (not the topic's last): the recorded head names it
    victim = last["p1"]
    assert victim != events[-1].event_id
    if log.backend == "sqlite":
        conn = sqlite3.connect(log.path)  # type: ignore[attr-defined]
        conn.execute("DELETE FROM events WHERE event_id = ?", (victim,))
        conn.commit()
        conn.close()
    else:
        with log._conn.transaction():  # type: ignore[attr-defined]
            log._conn.execute(  # type: ignore[attr-defined]
                f'DELETE FROM "{log.schema}".events WHERE event_id = %s',  # type: ignore[attr-defined]
                (victim,),
            )
    problems = verify(log).problems
    assert any("'p1'" in p["problem"] and "tail was removed" in p["problem"] for p in problems)


def test_a_refused_batch_leaves_every_chain_where_it_was(log: EventLog) -> None:
    log.append([NewEvent("p", "k", AT, {"a": 1})])

    class Boom(Exception):
        pass

    with pytest.raises(Boom), log.write() as txn:
        txn.append([NewEvent("p", "k", AT, {"b": 2}), NewEvent("q", "k", AT)])
        raise Boom
    log.append([NewEvent("q", "k", AT), NewEvent("p", "k", AT)])
    assert verify(log).ok
