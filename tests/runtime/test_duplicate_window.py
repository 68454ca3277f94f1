"""The duplicate window is looked up in the log, not carried in the persona's state, and
queued webhook bodies stay in their events (issue 15: the state is decoded in every write
transaction; carried, both grew without bound with traffic)."""

from __future__ import annotations

import json
import tempfile
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import AT0

from charter.runtime import (
    Kind,
    PersonaRuntime,
    PersonaRuntimeSpec,
    PostgresEventLog,
    ReceiptStatus,
    RunReceipt,
    Snapshot,
    SqliteEventLog,
)
from charter.runtime.projection import SNAPSHOT_EVERY
from charter.runtime.sqlite_log import completions_sql
from charter.runtime.state import PROJECTION_VERSION

W = "wide"
T = timedelta


def go(rt: PersonaRuntime, key: str, at=AT0, **kw: Any) -> RunReceipt:  # type: ignore[no-untyped-def]
    return rt.trigger(W, provider="test", kind="go", metadata={"id": key}, at=at, force=True, **kw)


def stored_state(rt: PersonaRuntime) -> dict[str, Any]:
    snapshot, _ = rt.log.load_persona(W, PROJECTION_VERSION, 0)
    assert snapshot is not None, "a writer saves a snapshot every SNAPSHOT_EVERY events"
    return snapshot.state


def test_the_state_does_not_grow_with_completed_keys(runtime: PersonaRuntime) -> None:
    sizes = []
    for n in range(300):
        assert go(runtime, f"k{n}", at=AT0 + T(seconds=n)).status is ReceiptStatus.COMPLETED
        if n in (99, 299):
            sizes.append(len(json.dumps(stored_state(runtime))))
    # before: every completed key of the last 24 h was in it (~60 bytes each)
    assert "completed" not in stored_state(runtime)
    assert abs(sizes[1] - sizes[0]) < 200, sizes
    # and the window still holds for the first key, completed 300 events ago
    again = go(runtime, "k0", at=AT0 + T(seconds=400))
    assert again.status is ReceiptStatus.DUPLICATE
    first = runtime.log.read(persona=W, limit=20)
    assert again.run_id == next(e.payload["run_id"] for e in first if e.kind == Kind.RUN_COMPLETED)


def test_window_holds_across_snapshots_and_ends_on_time(runtime: PersonaRuntime) -> None:
    first = go(runtime, "x")
    for n in range(SNAPSHOT_EVERY * 2):  # a snapshot (or two) after the completion
        go(runtime, f"other{n}", at=AT0 + T(seconds=1))
    dup = go(runtime, "x", at=AT0 + T(hours=23, minutes=59))
    assert dup.status is ReceiptStatus.DUPLICATE and dup.run_id == first.run_id
    assert dup.detail["duplicate_until"] == "2026-04-25T12:30:00Z"
    later = go(runtime, "x", at=AT0 + T(hours=24))  # until is exclusive
    assert later.status is ReceiptStatus.COMPLETED and later.run_id != first.run_id
    # the latest completion decides: its own window starts now
    assert go(runtime, "x", at=AT0 + T(hours=47)).run_id == later.run_id


def test_a_key_completed_earlier_in_the_same_transaction_is_a_duplicate(
    runtime: PersonaRuntime,
) -> None:
    item = runtime.trigger_item(W, provider="test", kind="go", metadata={"id": "same"}, force=True)
    receipts = runtime.transact(
        AT0,
        # two offers of one key in one transaction: the second must see the first's
        # completion, which the log does not hold yet
        lambda b: [runtime._submit(b, W, item, False, None, False) for _ in range(2)],
        persona=W,
        work_keys=[item.work_key],
    )
    assert [r.status for r in receipts] == [ReceiptStatus.COMPLETED, ReceiptStatus.DUPLICATE]
    assert receipts[1].run_id == receipts[0].run_id


def test_failed_runs_and_other_personas_do_not_count(runtime: PersonaRuntime) -> None:
    failed = go(runtime, "f", error="boom")
    assert failed.status is ReceiptStatus.FAILED
    assert go(runtime, "f", at=AT0 + T(seconds=1)).status is ReceiptStatus.COMPLETED
    # the same work key completed by another persona is not this persona's duplicate
    runtime.trigger(
        "review_captain", provider="test", kind="go", metadata={"id": "o"}, at=AT0, force=True
    )
    assert go(runtime, "o", at=AT0 + T(seconds=2)).status is ReceiptStatus.COMPLETED


def test_queued_bodies_stay_in_their_events(runtime: PersonaRuntime) -> None:
    body = {"id": "b1", "type": "go", "text": "x" * 2000}
    queued = runtime.trigger(
        W, provider="test", kind="go", payload=body, at=AT0, force=True, defer=True
    )
    assert queued.status is ReceiptStatus.QUEUED
    plain = go(runtime, "no-body", defer=True)
    assert plain.status is ReceiptStatus.QUEUED
    state = runtime.state(W)
    assert [("body" in q, q.get("has_body")) for q in state.queue] == [
        (False, True),
        (False, None),
    ]
    seen: list[dict[str, Any]] = []

    def execute(receipt: RunReceipt, item: dict[str, Any]) -> RunReceipt:
        seen.append(item)
        return runtime.finish_run(W, receipt.run_id or "", at=AT0 + T(seconds=2))

    done = runtime.drain(W, at=AT0 + T(seconds=1), execute=execute)
    assert [r.status for r in done] == [ReceiptStatus.COMPLETED] * 2
    assert seen[0]["body"] == body and "has_body" not in seen[0]
    assert "body" not in seen[1]
    # a key queued again after it completed is a duplicate at the drain's lookup
    assert go(runtime, "b1", at=AT0 + T(seconds=3)).status is ReceiptStatus.DUPLICATE


def test_a_version_1_snapshot_is_replayed_not_trusted(runtime: PersonaRuntime) -> None:
    """A log written before this change: its snapshot carries ``completed`` and bodies."""
    done = go(runtime, "old")
    runtime.trigger(
        W, provider="test", kind="go", payload={"id": "q", "n": 1}, at=AT0, force=True, defer=True
    )
    last = runtime.log.last_event_id()
    old_state = runtime.state(W).to_dict()
    old_state["completed"] = {}  # wrong on purpose: a v1 reader would trust it
    with runtime.log.write() as txn:
        txn.save_snapshot(Snapshot(W, last, 1, old_state))
    assert go(runtime, "old", at=AT0 + T(seconds=5)).run_id == done.run_id  # duplicate
    seen: list[dict[str, Any]] = []

    def execute(receipt: RunReceipt, item: dict[str, Any]) -> RunReceipt:
        seen.append(item)
        return runtime.finish_run(W, receipt.run_id or "", at=AT0 + T(seconds=7))

    runtime.drain(W, at=AT0 + T(seconds=6), execute=execute)
    assert [s["body"] for s in seen] == [{"id": "q", "n": 1}]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 150), st.booleans()),
        min_size=1,
        max_size=25,
    )
)
def test_lookups_match_a_model_of_the_window(steps: list[tuple[str, int, bool]]) -> None:
    """Offers at increasing times, some failing: duplicate exactly while the key's latest
    completion is less than the window old."""
    window = 100
    spec = PersonaRuntimeSpec(W, max_concurrency=4, duplicate_window_seconds=window)
    with tempfile.TemporaryDirectory() as tmp, SqliteEventLog(tmp) as log:
        rt = PersonaRuntime(log, [spec])
        latest: dict[str, int] = {}
        now = 0
        for key, dt, fails in steps:
            now += dt
            receipt = go(rt, key, at=AT0 + T(seconds=now), error="no" if fails else None)
            if key in latest and now < latest[key] + window:
                assert receipt.status is ReceiptStatus.DUPLICATE, (key, now, latest)
            else:
                expected = ReceiptStatus.FAILED if fails else ReceiptStatus.COMPLETED
                assert receipt.status is expected, (key, now, latest)
                if not fails:
                    latest[key] = now


def test_the_lookup_can_use_the_partial_index(log: Any) -> None:
    """The kind is written as a literal, so the planner can match the index's predicate."""
    if isinstance(log, SqliteEventLog):
        plan = " ".join(
            str(r[-1])
            for r in log._conn.execute(
                "EXPLAIN QUERY PLAN " + completions_sql(2), (log.topic, W, "a", "b")
            )
        )
        assert "USING INDEX events_completed_by_key" in plan, plan
        return
    assert isinstance(log, PostgresEventLog)
    conn = log._conn
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_bitmapscan = off")
    plan = "\n".join(
        r[0] for r in conn.execute(b"EXPLAIN " + log._completions, (["a", "b"], log.topic, W))
    )
    assert "events_completed_by_key" in plan, plan
