"""Issue 31 on both backends: delivery identity apart from work identity, coalescing that
is recorded, and work whose run died offered again until its attempts are used up."""

from __future__ import annotations

import contextlib
import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from runtime_support import AT0

from charter.runtime import (
    EventLog,
    Kind,
    PersonaRuntime,
    PersonaRuntimeSpec,
    ReceiptStatus,
    WorkItem,
)

GITHUB = Path(__file__).parent / "fixtures" / "github"
T = timedelta
P = "reviewer"


def _runtime(log: EventLog, **spec: Any) -> PersonaRuntime:
    persona = PersonaRuntimeSpec(P, triggers=("github.*",), **spec)
    return PersonaRuntime(log, [persona], holder="host-a")


def _push(after: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((GITHUB / "push.json").read_text())
    payload = copy.deepcopy(payload)
    payload["after"] = after
    return payload


def _accept(rt: PersonaRuntime, payload: dict[str, Any], delivery: str, at=AT0) -> Any:  # type: ignore[no-untyped-def]
    item = rt.trigger_item(
        P, provider="github", kind="push", payload=payload, delivery_id=f"github:{delivery}"
    )
    [receipt] = rt.accept_many([(P, item)], at=at)
    return receipt


def _kinds(rt: PersonaRuntime) -> list[str]:
    return [e.kind for e in rt.log.read(persona=P)]


def test_a_redelivery_is_refused_whatever_became_of_the_work(log: EventLog) -> None:
    rt = _runtime(log)
    first = _accept(rt, _push("a" * 40), "d-1")
    assert first.status is ReceiptStatus.QUEUED
    # redelivered while queued, and again after it ran: refused by its delivery id both
    # times (a work key alone would have queued it again once the run failed, or after
    # the duplicate window)
    again = _accept(rt, _push("a" * 40), "d-1", at=AT0 + T(seconds=1))
    assert again.status is ReceiptStatus.DUPLICATE and again.detail["delivery"] is True
    [ran] = rt.drain(P, at=AT0 + T(seconds=2))
    assert ran.status is ReceiptStatus.COMPLETED
    late = _accept(rt, _push("a" * 40), "d-1", at=AT0 + T(days=3))
    assert late.status is ReceiptStatus.DUPLICATE
    assert _kinds(rt).count(Kind.DELIVERY_DUPLICATE) == 2
    assert _kinds(rt).count(Kind.DELIVERY_RECEIVED) == 1
    # a different delivery of other work is work of its own
    other = _accept(rt, _push("b" * 40), "d-2", at=AT0 + T(days=3))
    assert other.status is ReceiptStatus.QUEUED


def test_pushes_to_one_ref_coalesce_into_the_newest_and_say_so(log: EventLog) -> None:
    rt = _runtime(log)
    running = rt.submit(
        P, WorkItem("schedule:reviewer:busy", "schedule"), at=AT0, hold=True
    )  # the one slot is taken: the pushes wait
    assert running.status is ReceiptStatus.STARTED
    keys = []
    for n, sha in enumerate(("1" * 40, "2" * 40, "3" * 40)):
        receipt = _accept(rt, _push(sha), f"p-{n}", at=AT0 + T(seconds=n))
        assert receipt.status is ReceiptStatus.QUEUED
        keys.append(receipt.work_key)
    queue = rt.state(P).queue
    assert [q["work_key"] for q in queue] == [keys[2]]  # one follow-up, on the newest
    coalesced = [e.payload for e in log.read(persona=P, kinds=(Kind.WORK_COALESCED,))]
    assert [(c["work_key"], c["into"], c["reason"]) for c in coalesced] == [
        (keys[0], keys[1], "superseded"),
        (keys[1], keys[2], "superseded"),
    ]
    assert [c["delivery_id"] for c in coalesced] == ["github:p-0", "github:p-1"]
    rt.finish_run(P, running.run_id or "", at=AT0 + T(seconds=5))
    [ran] = rt.drain(P, at=AT0 + T(seconds=5))
    assert ran.work_key == keys[2] and ran.status is ReceiptStatus.COMPLETED


def test_work_whose_run_died_is_retried_then_dead_lettered(log: EventLog) -> None:
    rt = _runtime(log, lease_ttl_seconds=10, max_attempts=3, retry_backoff_seconds=2)
    _accept(rt, _push("c" * 40), "r-1")
    at = AT0
    for attempt in (1, 2, 3):
        receipt = _admit_held(rt, at)
        assert receipt.status is ReceiptStatus.STARTED, attempt
        at = at + T(seconds=11)  # the holder died: its lease expires
        expired = rt.expire_leases(P, at=at)
        assert expired
        if attempt < 3:
            queued = rt.state(P).queue
            assert [q["attempt"] for q in queued] == [attempt + 1]
            # not before its backoff (2 s, then 4 s)
            assert _admit_held(rt, at) is None
            at = at + T(seconds=2 * 2 ** (attempt - 1))
    state = rt.state(P)
    assert state.queue == []
    status = rt.status(P, now=at).to_dict()
    [letter] = status["dead_letters"]
    assert letter["attempts"] == 3 and len(letter["reasons"]) == 3
    assert all("expired" in reason for reason in letter["reasons"])
    assert letter["delivery_id"] == "github:r-1"
    assert status["counters"]["retries"] == 2
    assert status["counters"]["attempts_exhausted"] == 1
    kinds = _kinds(rt)
    assert kinds.count(Kind.WORK_RETRIED) == 2 and kinds.count(Kind.DEAD_LETTERED) == 1
    # the retried runs were given the webhook body the work came with
    bodies = [e.payload.get("body_event_id") for e in log.read(kinds=(Kind.RUN_STARTED,))]
    assert len(set(bodies)) == 1 and bodies[0] is not None


def _admit_held(rt: PersonaRuntime, at) -> Any:  # type: ignore[no-untyped-def]
    """Admit the queue's next item held (as serve's worker does), without running it."""
    seen: list[Any] = []

    def execute(receipt: Any, item: dict[str, Any]) -> Any:
        assert item.get("body") is not None  # a retry is handed the webhook body too
        seen.append(receipt)
        raise _Died

    with contextlib.suppress(_Died):
        rt.drain(P, at=at, execute=execute, limit=1)
    return seen[0] if seen else None


class _Died(Exception):
    """The worker's process dies mid-run (the lease stays until it expires)."""


def test_a_retry_of_work_admitted_without_queueing_is_handed_its_body(log: EventLog) -> None:
    """``persona run --payload`` admits at once (no queued event holds the body): the
    run's start keeps it, so the retry after its process died gets the same payload."""
    rt = _runtime(log, lease_ttl_seconds=10, retry_backoff_seconds=0)
    body = _push("d" * 40)
    held = rt.trigger(P, provider="github", kind="push", payload=body, at=AT0, hold=True)
    assert held.status is ReceiptStatus.STARTED
    rt.expire_leases(P, at=AT0 + T(seconds=11))
    handed: list[Any] = []

    def execute(receipt: Any, item: dict[str, Any]) -> Any:
        handed.append(item.get("body"))
        return receipt

    rt.drain(P, at=AT0 + T(seconds=11), execute=execute)
    assert handed == [body]
