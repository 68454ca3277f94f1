"""A write transaction's persona rows, read in its first round trip, serve any later
state the runtime holds when it has the lock (issue 15).

A replica's threads share one state cache; a thread prefetches the events after the state
held when it asks for the lock, and while it waits another thread commits and leaves a
newer state. Before, the rows read were for that older id only: the thread queried again
(a round trip under the log's lock) and had decoded every row for nothing. Now the rows
after the newer state are taken from what was read, and only they are decoded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from runtime_support import AT0, new_pg_log

from charter.runtime import (
    Event,
    NewEvent,
    PersonaRuntime,
    PersonaRuntimeSpec,
    PostgresEventLog,
    ReceiptStatus,
)
from charter.runtime.log import Prefetch
from charter.runtime.state import PROJECTION_VERSION as V

P = "p"


@pytest.fixture
def log() -> Iterator[PostgresEventLog]:
    """Ten events of ``P`` between others' events."""
    with new_pg_log() as log:
        for i in range(10):
            at = AT0 + timedelta(seconds=i)
            payload = {"work_key": f"k{i}", "nested": {"i": [i, "x"]}}
            log.append([NewEvent("other", "persona.run.started", at, {"n": i}),
                        NewEvent(P, "persona.work.queued", at, payload)])  # fmt: skip
        yield log


def _ids(log: PostgresEventLog) -> list[int]:
    return [e.event_id for e in log.read(persona=P)]


def _no_query(log: PostgresEventLog, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any) -> Any:
        raise AssertionError("queried again under the lock")

    monkeypatch.setattr(log, "_persona_since_rows", refuse)


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = json.loads

    def loads(text: str, **kw: Any) -> Any:
        seen.append(text)
        return real(text, **kw)

    monkeypatch.setattr(json, "loads", loads)
    return seen


def _expected(log: PostgresEventLog, after: int, limit: int = 100) -> list[Event]:
    return log.read(persona=P, after=after, limit=limit)


def _served(
    log: PostgresEventLog, monkeypatch: pytest.MonkeyPatch, read_after: int, after: int
) -> tuple[tuple[int | None, list[Event]], list[str]]:
    """``persona_since(after)`` in a write whose rows were read after ``read_after``,
    refusing any further query; and the payloads it decoded."""
    with log.write(prefetch=Prefetch(P, V, 100, after=read_after)) as txn:
        _no_query(log, monkeypatch)
        decoded = _decodes(monkeypatch)
        return txn.persona_since(P, V, after, 100), decoded


def test_a_newer_held_state_takes_only_the_rows_after_it(
    log: PostgresEventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _ids(log)
    expected = _expected(log, ids[6])
    (stored, events), decoded = _served(log, monkeypatch, ids[2], ids[6])
    assert stored is None
    assert events == expected and [e.payload["work_key"] for e in events] == ["k7", "k8", "k9"]
    assert len(decoded) == 3  # the three after the newer state, not the seven read


def test_the_id_asked_for_is_served_as_before(
    log: PostgresEventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _ids(log)
    expected = _expected(log, ids[2])
    answer, decoded = _served(log, monkeypatch, ids[2], ids[2])
    assert answer == (None, expected) and len(decoded) == 7


def test_an_older_state_than_the_rows_read_is_queried(log: PostgresEventLog) -> None:
    ids = _ids(log)
    with log.write(prefetch=Prefetch(P, V, 100, after=ids[5])) as txn:
        assert txn.persona_since(P, V, ids[1], 100) == (None, _expected(log, ids[1]))


def test_a_full_page_read_is_not_cut_short(log: PostgresEventLog) -> None:
    """Three rows read after k0 end at k3; the three after k1 go on to k4: queried."""
    ids = _ids(log)
    with log.write(prefetch=Prefetch(P, V, 3, after=ids[0])) as txn:
        _, events = txn.persona_since(P, V, ids[1], 3)
    assert events == _expected(log, ids[1], 3)
    assert [e.payload["work_key"] for e in events] == ["k2", "k3", "k4"]


def test_rows_read_before_the_transaction_appended_are_not_used(log: PostgresEventLog) -> None:
    ids = _ids(log)
    with log.write(prefetch=Prefetch(P, V, 100, after=ids[2])) as txn:
        txn.append([NewEvent(P, "persona.work.queued", AT0, {"work_key": "mine"})])
        _, events = txn.persona_since(P, V, ids[6], 100)
        assert [e.payload["work_key"] for e in events] == ["k7", "k8", "k9", "mine"]


@pytest.mark.parametrize("held", [False, True], ids=["snapshot", "held state"])
def test_a_group_commit_reads_every_persona_with_the_lock(
    monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """Webhooks for four personas accepted in one transaction: each persona's state and
    duplicate window come with the lock, in the first round trip; before, the first
    persona's did and the three others were read one by one under the lock."""
    names = [f"q{n}" for n in range(4)]
    specs = [PersonaRuntimeSpec(n, triggers=("test.*",)) for n in names]
    with new_pg_log() as log:
        runtime = PersonaRuntime(log, specs)

        def accept(tag: str) -> list[Any]:
            work = [(n, runtime.trigger_item(n, provider="test", kind="go",
                                             metadata={"id": f"{tag}{i}"}))
                    for i in range(3) for n in names]  # fmt: skip
            return runtime.accept_many(work, at=AT0)

        assert all(r.status is ReceiptStatus.QUEUED for r in accept("a"))
        if not held:
            runtime.projection.cache.clear()
        sent: list[str] = []
        real = log._conn.execute

        def execute(query: Any, *args: Any, **kw: Any) -> Any:
            text = query.decode() if isinstance(query, bytes) else str(query)
            sent.append(text)
            return real(query, *args, **kw)

        monkeypatch.setattr(log._conn, "execute", execute)
        receipts = accept("b")
        monkeypatch.undo()
        assert [r.status for r in receipts] == [ReceiptStatus.QUEUED] * 12
        assert len(sent) == 2 and sent[1].rstrip().endswith("COMMIT"), sent
        accept("b")  # offered again: each persona's queue, read with the lock, has them
        for name in names:
            state = runtime.state(name)
            assert len(state.queue) == 6 and state.counters.get("coalesced") == 3
            assert state.to_dict() == runtime.projection.rebuild(name).to_dict()
