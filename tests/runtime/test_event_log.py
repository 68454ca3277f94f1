"""The EventLog contract, run against SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from charter.runtime import TOPIC, EventLog, Kind, NewEvent, PostgresEventLog, Snapshot

AT = datetime(2026, 4, 24, 12, 30, tzinfo=UTC)


def ev(
    persona: str = "merge_captain", kind: str = Kind.TRIGGER_RECEIVED, **payload: object
) -> NewEvent:
    return NewEvent(persona, kind, AT, dict(payload), actor="test", persona_version="0.1.0")


def test_empty_log(log: EventLog) -> None:
    assert log.last_event_id() == 0
    assert log.read() == []
    assert log.topic == TOPIC


def test_append_assigns_increasing_ids_and_round_trips(log: EventLog) -> None:
    first = log.append([ev(n=1)])
    batch = log.append([ev(n=2), ev("review_captain", n=3), ev(n=4)])
    assert [e.event_id for e in first + batch] == [1, 2, 3, 4]
    events = log.read()
    assert [e.payload["n"] for e in events] == [1, 2, 3, 4]
    e = events[1]
    assert (e.persona, e.kind, e.actor, e.persona_version) == (
        "merge_captain",
        Kind.TRIGGER_RECEIVED,
        "test",
        "0.1.0",
    )
    assert e.occurred_at == AT
    assert log.last_event_id() == 4


def test_read_filters_are_strictly_after(log: EventLog) -> None:
    log.append([ev(n=i) if i % 2 else ev("other", n=i) for i in range(1, 7)])
    assert [e.event_id for e in log.read(after=2)] == [3, 4, 5, 6]
    assert [e.event_id for e in log.read(after=2, limit=2)] == [3, 4]
    assert [e.event_id for e in log.read(persona="other")] == [2, 4, 6]
    assert log.read(after=6) == []


def test_read_by_kind(log: EventLog) -> None:
    log.append([ev(kind=k, n=i) for i, k in enumerate(["a", "b", "a", "c", "b"], 1)])
    assert [e.event_id for e in log.read(kinds={"a", "c"})] == [1, 3, 4]
    assert [e.event_id for e in log.read(after=1, kinds=["b"], limit=1)] == [2]
    assert [e.event_id for e in log.read(persona="merge_captain", kinds={"c"})] == [4]
    assert log.read(kinds=()) == []
    with log.read_view() as txn:
        assert [e.event_id for e in txn.read(after=2, kinds=frozenset({"b"}))] == [5]


def test_multi_event_append_is_atomic(log: EventLog) -> None:
    log.append([ev(n=1)])
    with pytest.raises(RuntimeError), log.write() as txn:
        txn.append([ev(n=2), ev(n=3)])
        raise RuntimeError("writer failed mid-transaction")
    assert [e.payload["n"] for e in log.read()] == [1]
    assert log.append([ev(n=4)])[0].event_id == 2


def test_unserialisable_payload_is_refused_before_writing(log: EventLog) -> None:
    with pytest.raises(TypeError):
        ev(bad=object())
    assert log.last_event_id() == 0


def test_snapshots_round_trip(log: EventLog) -> None:
    with log.write() as txn:
        assert txn.load_snapshot("p") is None
        txn.save_snapshot(Snapshot("p", 7, 1, {"a": [1, 2], "b": None}))
        txn.save_snapshot(Snapshot("p", 9, 1, {"a": [3]}))
    with log.read_view() as txn:
        assert txn.load_snapshot("p") == Snapshot("p", 9, 1, {"a": [3]})


def test_wait_for_append(log: EventLog) -> None:
    assert log.wait_for_append(0, 0.0) is False
    log.append([ev()])
    assert log.wait_for_append(0, 0.0) is True
    assert log.last_seen == 1
    assert log.wait_for_append(1, 0.01) is False


def test_postgres_waits_on_the_notify_payload(log: EventLog) -> None:
    """A commit's NOTIFY carries its last id: the waiter needs no query to know it, ignores
    another topic's commits on the same channel, and asks when it cannot tell."""
    if not isinstance(log, PostgresEventLog):
        return
    writer = PostgresEventLog(log.url)
    other = PostgresEventLog(log.url, topic="another.topic")
    try:
        assert log.wait_for_append(0, 0.0) is False  # listening from here on
        queries: list[int] = []
        real = log.last_event_id

        def counted() -> int:
            queries.append(1)
            return real()

        log.last_event_id = counted  # type: ignore[method-assign]
        writer.append([ev(n=1), ev(kind="persona.x", n=2)])
        assert log.wait_for_append(0, 5.0) is True
        assert (log.last_seen, queries) == (2, [])
        assert log.kinds_seen == {Kind.TRIGGER_RECEIVED, "persona.x"}
        other.append([ev(n=3)])  # the schema's channel, another topic
        assert log.wait_for_append(2, 0.3) is False
        # an old writer's payload (the id alone) is answered by a query
        writer._conn.execute(f"SELECT pg_notify('{log.channel}', '2')")
        assert log.wait_for_append(2, 0.3) is False and queries
        writer.append([ev(kind="persona.y", n=4)])
        assert log.wait_for_append(2, 5.0) is True and log.last_seen == 3
        assert log.kinds_seen == {"persona.y"}
        writer.append([ev(kind="persona.z", n=5)])
        writer.append([ev(n=6)])
        assert log.wait_for_append(3, 5.0) is True
        # whatever was notified since the last return (here one or both commits)
        assert log.kinds_seen is not None and "persona.z" in log.kinds_seen
        # a caller past what it saw, with no notify to go by, asks: kinds unknown
        assert log.wait_for_append(1, 0.0) is True and log.kinds_seen is None
        # kinds that would not fit in a payload are left out: the waiter cannot tell
        writer.append([ev(kind=f"persona.k{n:04d}" + "x" * 60) for n in range(120)])
        assert log.wait_for_append(5, 5.0) is True and log.kinds_seen is None
        assert log.last_seen == 125
    finally:
        writer.close()
        other.close()


WRITER = """
import sys
from datetime import UTC, datetime
from charter.runtime import NewEvent, PostgresEventLog, SqliteEventLog
loc, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
log = PostgresEventLog(loc) if loc.startswith("postgresql") else SqliteEventLog(loc)
at = datetime(2026, 4, 24, tzinfo=UTC)
for i in range(n):
    log.append([NewEvent(who, "persona.test", at, {"i": i, "part": p}) for p in (0, 1)])
log.close()
"""


def test_concurrent_writer_processes_never_collide(
    state_location: dict[str, str], log_factory: Callable[[], EventLog]
) -> None:
    loc = state_location.get("url") or state_location["state_dir"]
    log_factory().close()  # create the schema once
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, loc, f"w{k}", "25"]) for k in range(3)]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    log = log_factory()
    try:
        events = log.read()
        assert [e.event_id for e in events] == list(range(1, 151))
        # both halves of every batch are adjacent: appends are atomic and never interleave
        for a, b in zip(events[::2], events[1::2], strict=True):
            assert (a.persona, a.payload["i"], a.payload["part"]) == (b.persona, b.payload["i"], 0)
            assert b.payload["part"] == 1
        for who in ("w0", "w1", "w2"):
            mine = [e.payload["i"] for e in events if e.persona == who and e.payload["part"] == 0]
            assert mine == list(range(25))
    finally:
        log.close()


@pytest.mark.parametrize("backend", ["postgres"])
def test_postgres_sessions_end_when_left_idle_in_a_transaction(
    state_location: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client cut off inside a write keeps the log's lock until the server ends its
    session: charter's connections ask for that after a few seconds (the effect, with a
    host cut off by a partition: tests/run/test_hosts_netns.py); a user's own setting,
    in the URL's ``options`` or in ``PGOPTIONS``, is kept."""
    from psycopg.conninfo import conninfo_to_dict

    from charter.runtime import PostgresEventLog
    from charter.runtime.postgres_log import session_conninfo

    monkeypatch.delenv("PGOPTIONS", raising=False)
    log = PostgresEventLog(state_location["url"])
    try:
        shown = log._conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
        assert shown == ("5s",)
    finally:
        log.close()
    base = state_location["url"].split("?", 1)[0]
    own = session_conninfo(f"{base}?options=-c%20idle_in_transaction_session_timeout%3D1min")
    assert conninfo_to_dict(own)["options"] == "-c idle_in_transaction_session_timeout=1min"
    monkeypatch.setenv("PGOPTIONS", "-c search_path=elsewhere")
    both = session_conninfo(base)  # an explicit options would replace PGOPTIONS
    assert conninfo_to_dict(both)["options"] == (
        "-c search_path=elsewhere -c idle_in_transaction_session_timeout=5000"
    )
    # the client's side: unacknowledged data and idle connections time out (the effect:
    # tests/run/test_hosts_netns.py); a URL's own value is kept
    given = conninfo_to_dict(session_conninfo(f"{base}?tcp_user_timeout=2500"))
    assert (given["tcp_user_timeout"], given["keepalives"], given["keepalives_idle"]) == (
        "2500",
        "1",
        "10",
    )
    assert conninfo_to_dict(session_conninfo(base))["tcp_user_timeout"] == "10000"
