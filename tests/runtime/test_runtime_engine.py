"""PersonaRuntime semantics on both backends: lifecycle, leases, budgets, controls."""

from __future__ import annotations

from datetime import timedelta

import pytest
from runtime_support import AT0

from charter.runtime import (
    Kind,
    NewEvent,
    PersonaRuntime,
    ReceiptStatus,
    UndeclaredTriggerError,
    UnknownPersonaError,
)

M = "merge_captain"
T = timedelta


def pr(rt: PersonaRuntime, number: int, at=AT0, **kw: object):  # type: ignore[no-untyped-def]
    return rt.trigger(
        M,
        provider="github",
        kind="pull_request",
        metadata={"repository": "burin-labs/harn", "number": str(number)},
        at=at,
        **kw,  # type: ignore[arg-type]
    )


def kinds(rt: PersonaRuntime, after: int = 0) -> list[str]:
    return [e.kind for e in rt.log.read(after=after, persona=M)]


def life(rt: PersonaRuntime, at=AT0) -> str:  # type: ignore[no-untyped-def]
    return rt.status(M, now=at).lifecycle


def test_tick_completes_with_a_full_receipt(runtime: PersonaRuntime) -> None:
    assert life(runtime) == "inactive"
    receipt = runtime.tick(M, at=AT0, cost_usd=0.02, tokens=120)
    assert receipt.status is ReceiptStatus.COMPLETED
    assert receipt.work_key == "schedule:merge_captain:2026-04-24T12:30Z"
    assert receipt.run_id and receipt.lease and receipt.budget_receipt_id
    assert receipt.lease.holder == "test-host"
    assert receipt.lease.expires_at == "2026-04-24T12:35:00Z"
    assert kinds(runtime) == [
        Kind.SCHEDULE_FIRED,
        Kind.LEASE_ACQUIRED,
        Kind.RUN_STARTED,
        Kind.RUN_COMPLETED,
        Kind.LEASE_RELEASED,
    ]
    status = runtime.status(M, now=AT0).to_dict()
    assert status["lifecycle"] == "idle"
    assert status["last_run"]["run_id"] == receipt.run_id
    assert status["budget"]["spent"]["hour_usd"] == pytest.approx(0.02)
    assert status["budget"]["spent"]["day_tokens"] == 120
    assert status["budget"]["last_receipt_id"] == receipt.budget_receipt_id
    assert status["value_receipts"]["count"] == 1
    assert status["leases"] == []
    assert status["version"] == "0.1.0"


def test_all_lifecycle_states_are_reachable(runtime: PersonaRuntime) -> None:
    assert life(runtime) == "inactive"
    held = pr(runtime, 1, hold=True)
    assert held.status is ReceiptStatus.STARTED
    assert life(runtime) == "starting"
    runtime.heartbeat(M, held.run_id or "", at=AT0 + T(seconds=10))
    assert life(runtime) == "running"
    runtime.finish_run(M, held.run_id or "", at=AT0 + T(seconds=20), cost_usd=0.01)
    assert life(runtime) == "idle"
    failed = pr(runtime, 2, at=AT0 + T(seconds=30), error="workflow crashed")
    assert failed.status is ReceiptStatus.FAILED and failed.error == "workflow crashed"
    assert life(runtime) == "failed"
    assert runtime.status(M, now=AT0).to_dict()["last_error"] == "workflow crashed"
    runtime.pause(M, at=AT0 + T(seconds=40))
    assert life(runtime) == "paused"
    pr(runtime, 3, at=AT0 + T(seconds=41))

    # A drain interrupted after RESUMED (a crash mid-resume) leaves the persona draining.
    def resumed_only(batch):  # type: ignore[no-untyped-def]
        batch.emit(M, Kind.RESUMED, {"draining": True})

    runtime.transact(AT0 + T(seconds=50), resumed_only)
    assert life(runtime) == "draining"
    done = runtime.resume(M, at=AT0 + T(seconds=51))  # continues the interrupted drain
    assert [r.status for r in done.drained] == [ReceiptStatus.COMPLETED]
    assert life(runtime) == "idle"
    runtime.disable(M, at=AT0 + T(seconds=60))
    assert life(runtime) == "disabled"


def test_duplicate_within_window_not_forever(runtime: PersonaRuntime) -> None:
    first = pr(runtime, 462)
    assert first.work_key == "github:burin-labs/harn:pr:462"
    again = pr(runtime, 462, at=AT0 + T(hours=23))
    assert again.status is ReceiptStatus.DUPLICATE and again.run_id == first.run_id
    later = pr(runtime, 462, at=AT0 + T(hours=24, seconds=1))
    assert later.status is ReceiptStatus.COMPLETED and later.run_id != first.run_id


def test_lease_conflict_and_max_concurrency(runtime: PersonaRuntime) -> None:
    held = pr(runtime, 1, hold=True)
    busy = pr(runtime, 1, at=AT0 + T(seconds=5))
    assert busy.status is ReceiptStatus.LEASE_BUSY
    assert busy.lease and busy.lease.lease_id == held.lease.lease_id  # type: ignore[union-attr]
    other = pr(runtime, 2, at=AT0 + T(seconds=6))  # max_concurrency defaults to 1
    assert other.status is ReceiptStatus.QUEUED  # a different key waits; only the same is busy
    assert other.detail == {"coalesced": False, "reason": "max_concurrency", "position": 1,
                            "running": 1}  # fmt: skip
    conflicts = [e for e in runtime.log.read() if e.kind == Kind.LEASE_CONFLICT]
    assert [c.payload["reason"] for c in conflicts] == ["work_key_leased"]

    def hook(key: str):  # type: ignore[no-untyped-def]
        return runtime.trigger(
            "wide", provider="webhook", kind="deploy", metadata={"id": key}, at=AT0, hold=True
        )

    assert hook("a").status is ReceiptStatus.STARTED
    assert hook("b").status is ReceiptStatus.STARTED  # different key, max_concurrency = 2
    assert hook("c").status is ReceiptStatus.QUEUED
    assert hook("a").status is ReceiptStatus.LEASE_BUSY
    assert hook("c").status is ReceiptStatus.QUEUED  # coalesced: one entry per key
    assert [q["work_key"] for q in runtime.state("wide").queue] == ["webhook:webhook:deploy:c"]


def test_work_at_max_concurrency_is_queued_fifo_and_drained(runtime: PersonaRuntime) -> None:
    held = pr(runtime, 1, hold=True)
    for n in (2, 3, 2, 4):  # 2 twice: one queue entry per key
        assert pr(runtime, n, at=AT0 + T(seconds=n)).status is ReceiptStatus.QUEUED
    queue = runtime.status(M, now=AT0).to_dict()["queue"]
    assert [q["work_key"][-4:] for q in queue["items"]] == ["pr:2", "pr:3", "pr:4"]
    # nothing drains while the lease is held
    assert runtime.drain(M, at=AT0 + T(seconds=10)) == []
    runtime.finish_run(M, held.run_id or "", at=AT0 + T(seconds=20))
    # capacity is free but the queue is not empty: a newcomer goes behind it (FIFO)
    assert pr(runtime, 5, at=AT0 + T(seconds=21)).status is ReceiptStatus.QUEUED
    order: list[str] = []

    def execute(receipt, item):  # type: ignore[no-untyped-def]
        order.append(item["work_key"])
        # a run's lease is held while it executes: the drain admits one at a time
        assert runtime.status(M, now=AT0).to_dict()["leases"][0]["work_key"] == item["work_key"]
        return runtime.finish_run(M, receipt.run_id or "", at=AT0 + T(seconds=30))

    drained = runtime.drain(M, at=AT0 + T(seconds=30), execute=execute)
    assert [r.status for r in drained] == [ReceiptStatus.COMPLETED] * 4
    assert [k[-4:] for k in order] == ["pr:2", "pr:3", "pr:4", "pr:5"]
    assert runtime.state(M).queue == []
    log = runtime.log.read(persona=M)
    queued = [e.payload["work_key"] for e in log if e.kind == Kind.WORK_QUEUED]
    started = [e.payload["work_key"] for e in log if e.kind == Kind.RUN_STARTED]
    assert started[1:] == queued  # every queued key ran exactly once, in arrival order
    assert [e.kind for e in log].count(Kind.WORK_COALESCED) == 1
    # at capacity again, a key completed within the window is a duplicate, not queued
    pr(runtime, 9, hold=True, at=AT0 + T(seconds=40))
    assert pr(runtime, 2, at=AT0 + T(seconds=41)).status is ReceiptStatus.DUPLICATE


def test_drain_stops_at_capacity_and_recovers_expired_leases(runtime: PersonaRuntime) -> None:
    held = pr(runtime, 1, hold=True)
    assert pr(runtime, 2, at=AT0 + T(seconds=1)).status is ReceiptStatus.QUEUED
    # the holder dies (kill -9): its lease expires and the drain recovers it first
    later = AT0 + T(seconds=301)
    drained = runtime.drain(M, at=later)
    assert [r.status for r in drained] == [ReceiptStatus.COMPLETED]
    tail = kinds(runtime, after=held.event_ids[-1])
    assert tail.index(Kind.LEASE_EXPIRED) < tail.index(Kind.WORK_DEQUEUED)
    # a paused persona's queue waits for resume, not for drain
    pr(runtime, 3, hold=True, at=later)
    assert pr(runtime, 4, at=later).status is ReceiptStatus.QUEUED
    runtime.pause(M, at=later)
    assert runtime.drain(M, at=later + T(seconds=400)) == []
    # (issue 31) each expired run's work is offered again, after the queued work, until
    # its attempts are used up: pr:1 (expired at `later`) and pr:3 (expired while paused)
    assert [q["work_key"][-4:] for q in runtime.state(M).queue] == ["pr:1", "pr:4", "pr:3"]
    assert [q.get("attempt") for q in runtime.state(M).queue] == [2, None, 2]


def test_expired_lease_is_recorded_before_reacquisition(runtime: PersonaRuntime) -> None:
    held = pr(runtime, 7, hold=True)
    later = AT0 + T(seconds=301)
    assert runtime.status(M, now=later).to_dict()["leases"] == []
    # unrecovered: the dead run is reported (seed: an expired run counts as failed)
    assert life(runtime, later) == "failed"
    again = pr(runtime, 7, at=later)
    # (issue 31) the expired run's work is offered again (attempt 2, after the backoff);
    # the sender's retry of the same key joins it instead of running beside it
    assert again.status is ReceiptStatus.QUEUED and again.detail == {"coalesced": True}
    tail = kinds(runtime, after=held.event_ids[-1])
    assert tail[:4] == [
        Kind.LEASE_EXPIRED, Kind.WORK_RETRIED, Kind.WORK_QUEUED, Kind.WORK_COALESCED
    ]  # fmt: skip
    assert runtime.drain(M, at=later) == []  # still in its backoff (5 s by default)
    [done] = runtime.drain(M, at=later + T(seconds=5))
    assert done.status is ReceiptStatus.COMPLETED
    status = runtime.status(M, now=later).to_dict()
    assert status["counters"]["leases_expired"] == 1
    assert status["counters"]["retries"] == 1


def test_heartbeat_renews_the_lease(runtime: PersonaRuntime) -> None:
    held = pr(runtime, 8, hold=True)
    lease = runtime.heartbeat(M, held.run_id or "", at=AT0 + T(seconds=200))
    assert lease.expires_at == "2026-04-24T12:38:20Z"
    assert pr(runtime, 8, at=AT0 + T(seconds=400)).status is ReceiptStatus.LEASE_BUSY
    assert life(runtime, AT0 + T(seconds=400)) == "running"


def test_budget_caps_refuse_before_work_with_receipt(runtime: PersonaRuntime) -> None:
    too_big = runtime.tick(M, at=AT0, cost_usd=0.31)
    assert too_big.status is ReceiptStatus.BUDGET_EXHAUSTED
    assert too_big.exhaustion_reason == "run_usd" and too_big.budget_receipt_id
    assert kinds(runtime) == [Kind.BUDGET_EXHAUSTED]  # nothing else recorded
    event = runtime.log.read()[-1]
    assert event.payload["receipt_id"] == too_big.budget_receipt_id
    assert event.payload["limit"] == 0.3

    assert pr(runtime, 1, cost_usd=0.25).status is ReceiptStatus.COMPLETED
    assert pr(runtime, 2, cost_usd=0.25).status is ReceiptStatus.COMPLETED  # exactly 0.5
    hourly = pr(runtime, 3, cost_usd=0.01)
    assert hourly.exhaustion_reason == "hourly_usd"
    status = runtime.status(M, now=AT0).to_dict()["budget"]
    assert status["exhausted"] and status["exhaustion_reason"] == "hourly_usd"
    assert status["last_receipt_id"] == hourly.budget_receipt_id
    # the hour rolls over: the reason clears and work is admitted again
    next_hour = AT0 + T(hours=1)
    assert runtime.status(M, now=next_hour).to_dict()["budget"]["exhaustion_reason"] is None
    assert pr(runtime, 3, at=next_hour, cost_usd=0.25).status is ReceiptStatus.COMPLETED
    assert (
        pr(runtime, 4, at=next_hour + T(hours=1), cost_usd=0.25).status is ReceiptStatus.COMPLETED
    )
    daily = pr(runtime, 5, at=next_hour + T(hours=2), cost_usd=0.01)
    assert daily.exhaustion_reason == "daily_usd"
    tomorrow = AT0 + T(days=1)
    assert pr(runtime, 5, at=tomorrow, tokens=1001).exhaustion_reason == "max_tokens"
    assert pr(runtime, 5, at=tomorrow, tokens=1000).status is ReceiptStatus.COMPLETED


def test_spend_is_budget_checked(runtime: PersonaRuntime) -> None:
    ok = runtime.spend(M, cost_usd=0.2, tokens=10, at=AT0)
    assert ok.status is ReceiptStatus.COMPLETED and ok.budget_receipt_id
    refused = runtime.spend(M, cost_usd=0.31, at=AT0)
    assert refused.status is ReceiptStatus.BUDGET_EXHAUSTED
    spent = runtime.status(M, now=AT0).to_dict()["budget"]["spent"]
    assert spent["hour_usd"] == pytest.approx(0.2) and spent["total_tokens"] == 10


def test_pause_queues_and_resume_drains_once_in_order(runtime: PersonaRuntime) -> None:
    runtime.pause(M, at=AT0)
    receipts = [
        pr(runtime, 1, cost_usd=0.2),
        pr(runtime, 2, cost_usd=0.25),
        pr(runtime, 1, cost_usd=0.01),  # same key: coalesced into the first entry
        pr(runtime, 3, cost_usd=0.2),
    ]
    assert [r.status for r in receipts] == [ReceiptStatus.QUEUED] * 4
    assert receipts[2].detail == {"coalesced": True}
    queue = runtime.status(M, now=AT0).to_dict()["queue"]
    assert [q["work_key"][-1] for q in queue["items"]] == ["1", "2", "3"]
    assert not any(e.kind == Kind.RUN_STARTED for e in runtime.log.read())

    resumed = runtime.resume(M, at=AT0 + T(minutes=1))
    statuses = [(r.work_key[-1], r.status) for r in resumed.drained]  # type: ignore[index]
    assert statuses == [
        ("1", ReceiptStatus.COMPLETED),
        ("2", ReceiptStatus.COMPLETED),
        ("3", ReceiptStatus.BUDGET_EXHAUSTED),  # 0.2 + 0.25 + 0.2 > hourly 0.5
    ]
    assert resumed.drained[0].cost_usd == 0.2  # original cost kept
    status = runtime.status(M, now=AT0 + T(minutes=1)).to_dict()
    assert status["lifecycle"] == "idle"
    assert [q["work_key"] for q in status["queue"]["items"]] == ["github:burin-labs/harn:pr:3"]
    # resume drains once: a second resume of an active persona does nothing
    again = runtime.resume(M, at=AT0 + T(hours=1))
    assert not again.changed and again.drained == ()


def test_disable_dead_letters_and_only_enable_reenables(runtime: PersonaRuntime) -> None:
    runtime.pause(M, at=AT0)
    pr(runtime, 1)
    runtime.disable(M, at=AT0)
    dead = pr(runtime, 2)
    assert dead.status is ReceiptStatus.DEAD_LETTERED
    status = runtime.status(M, now=AT0).to_dict()
    assert status["dead_lettered"] == 2  # the queued item and the later trigger
    assert status["queue"]["count"] == 0
    resumed = runtime.resume(M, at=AT0)
    assert not resumed.changed and "enable" in (resumed.message or "")
    assert resumed.lifecycle == "disabled"
    assert not runtime.pause(M, at=AT0).changed
    enabled = runtime.enable(M, at=AT0)
    assert enabled.changed and enabled.lifecycle == "idle"
    assert pr(runtime, 2).status is ReceiptStatus.COMPLETED


def test_undeclared_trigger_refused_unless_forced(runtime: PersonaRuntime) -> None:
    with pytest.raises(UndeclaredTriggerError, match="does not declare"):
        runtime.trigger(
            M, provider="slack", kind="message", metadata={"channel": "C", "ts": "1"}, at=AT0
        )
    forced = runtime.trigger(
        M,
        provider="slack",
        kind="message",
        metadata={"channel": "C", "ts": "1"},
        at=AT0,
        force=True,
    )
    assert forced.work_key == "slack:C:1"
    with pytest.raises(UnknownPersonaError):
        runtime.tick("nobody", at=AT0)


def test_next_scheduled_run_is_the_soonest_and_never_past(runtime: PersonaRuntime) -> None:
    status = runtime.status(M, now=AT0).to_dict()
    assert status["next_scheduled_run"] == "2026-04-24T13:00:00Z"
    # Monday 08:45: the weekly 09:00 beats */30's 09:00? equal; 08:59 -> 09:00 from both
    monday = AT0.replace(month=4, day=27, hour=8, minute=59)
    assert runtime.status(M, now=monday).to_dict()["next_scheduled_run"] == "2026-04-27T09:00:00Z"
    assert runtime.status("review_captain", now=AT0).to_dict()["next_scheduled_run"] is None


def test_status_is_snapshot_plus_tail_and_equals_full_replay(runtime: PersonaRuntime) -> None:
    for n in range(12):  # enough events for writers to have saved a snapshot
        pr(runtime, n, at=AT0 + T(minutes=n), cost_usd=0.01)
    runtime.pause(M, at=AT0 + T(minutes=20))
    pr(runtime, 99, at=AT0 + T(minutes=21))
    # a raw append outside the runtime only lengthens the tail
    runtime.log.append([NewEvent(M, Kind.DEAD_LETTERED, AT0, {"work_key": "x"})])
    with runtime.log.read_view() as txn:
        snap = txn.load_snapshot(M)
    assert snap is not None and snap.event_id < runtime.log.last_event_id()
    incremental = runtime.projection.state(M)
    assert incremental == runtime.projection.rebuild(M)
    assert incremental.dead_lettered == 1
