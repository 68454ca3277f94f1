"""Killed writers, handoff routes and the supervision feed (both backends)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from runtime_support import AT0, make_specs

from charter.policy import current_stack
from charter.runtime import (
    EventLog,
    Handoff,
    HandoffError,
    Kind,
    PersonaRuntime,
    RouteContext,
    adopt_handoff_policy,
    dispatch_handoff,
    select_route,
    tail,
)

WRITER = """
import sys
from datetime import UTC, datetime, timedelta
from charter.runtime import PersonaRuntime, PostgresEventLog, SqliteEventLog
sys.path.insert(0, sys.argv[2])
from runtime_support import make_specs
loc = sys.argv[1]
log = PostgresEventLog(loc) if loc.startswith("postgresql") else SqliteEventLog(loc)
rt = PersonaRuntime(log, make_specs())
at = datetime(2026, 4, 24, tzinfo=UTC)
i = 0
while True:  # killed from outside
    i += 1
    rt.trigger("wide", provider="webhook", kind="deploy", metadata={"id": str(i % 7)},
               at=at + timedelta(seconds=i), cost_usd=0.001)
    if i % 5 == 0:
        rt.pause("wide", at=at + timedelta(seconds=i))
    if i % 5 == 2:
        rt.resume("wide", at=at + timedelta(seconds=i))
"""


def test_killed_writer_leaves_log_and_status_consistent(
    state_location: dict[str, str], log_factory: Callable[[], EventLog]
) -> None:
    import os

    loc = state_location.get("url") or state_location["state_dir"]
    log = log_factory()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, loc, os.path.dirname(__file__)],
    )
    try:
        while log.last_event_id() < 60:  # wait for real progress, then kill mid-stream
            assert proc.poll() is None, "writer died on its own"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        events = log.read()
        assert [e.event_id for e in events] == list(range(1, len(events) + 1))
        runtime = PersonaRuntime(log, make_specs())
        incremental = runtime.projection.state("wide")
        assert incremental == runtime.projection.rebuild("wide")
        # every admitted run was completed in the same transaction: no orphaned leases
        assert incremental.leases == {} and incremental.runs == {}
        started = sum(e.kind == Kind.RUN_STARTED for e in events)
        finished = sum(e.kind in (Kind.RUN_COMPLETED, Kind.RUN_FAILED) for e in events)
        assert started == finished
        # the log is writable again
        receipt = runtime.tick("wide", at=AT0)
        assert receipt.event_ids[0] == events[-1].event_id + 1
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()


def test_route_selection_is_first_match_in_order(runtime: PersonaRuntime) -> None:
    h = Handoff("merge_receipt", "merge_captain")
    routes = runtime.routes
    assert select_route(routes, h, RouteContext()).target == "persona://review_captain"  # type: ignore[union-attr]
    assert (
        select_route(routes, h, RouteContext(budget_exhausted=True)).target == "human:maintainers"
    )  # type: ignore[union-attr]
    both = select_route(routes, h, RouteContext(budget_exhausted=True, approval_denied=True))
    assert both is not None and both.target == "review_captain" and both.rule_index == 0
    assert select_route(routes, Handoff("other", "merge_captain"), RouteContext()) is None


def test_custom_predicates_and_unknown_ones(runtime: PersonaRuntime) -> None:
    from charter.runtime import HandoffRoute

    routes = [
        HandoffRoute.from_mapping(
            {"id": "r", "route": [{"target": "x", "when": "is_large"}, {"target": "y"}]}
        )
    ]
    big = RouteContext(predicates={"is_large": lambda h, c: h.payload.get("lines", 0) > 500})
    assert select_route(routes, Handoff("k", "a", {"lines": 900}), big).target == "x"  # type: ignore[union-attr]
    assert select_route(routes, Handoff("k", "a", {"lines": 9}), big).target == "y"  # type: ignore[union-attr]
    with pytest.raises(HandoffError, match="unknown route predicate 'is_large'"):
        select_route(routes, Handoff("k", "a"), RouteContext())


def test_dispatch_lands_in_inbox_and_carries_policy_override(runtime: PersonaRuntime) -> None:
    seen = []
    override = {"tools": {"allow": ["read_note"]}, "side_effect_level": "read_only"}
    record = dispatch_handoff(
        runtime,
        Handoff("merge_receipt", "merge_captain", {"pr": 462}, "PR 462 merged", override),
        at=AT0,
        dispatchers={"persona": seen.append},
    )
    assert seen == [record]
    assert record.route.route_id == "merge-receipt" and record.target.name == "review_captain"
    assert record.audit == {"scope": {"source_handoff": record.handoff_id}}
    dispatched = runtime.log.read(persona="merge_captain")[-1]
    assert dispatched.kind == Kind.HANDOFF_DISPATCHED
    assert dispatched.payload["route_id"] == "merge-receipt"
    assert dispatched.payload["target"] == "persona://review_captain"
    inbox = runtime.status("review_captain", now=AT0).to_dict()["inbox"]
    assert inbox["count"] == 1
    item = inbox["items"][0]
    assert item["policy_override"] == override and item["payload"] == {"pr": 462}

    with adopt_handoff_policy(item) as frame:
        assert frame is not None and current_stack() == (frame,)  # replacement, not merge
        assert frame.source_handoff == record.handoff_id
    run = runtime.accept_handoff("review_captain", record.handoff_id, at=AT0)
    assert run.status.value == "started" and run.work_key == f"handoff:{record.handoff_id}"
    assert runtime.status("review_captain", now=AT0).to_dict()["inbox"]["count"] == 0


def test_dispatch_to_non_persona_targets_and_errors(runtime: PersonaRuntime) -> None:
    runtime.tick("merge_captain", at=AT0, cost_usd=0.31)  # run_usd exhaustion
    calls = []
    record = dispatch_handoff(
        runtime,
        Handoff("merge_receipt", "merge_captain"),
        at=AT0,
        dispatchers={"human": calls.append},
    )
    assert record.target.scheme == "human" and calls == [record]  # budget_exhausted route
    with pytest.raises(HandoffError, match="invalid policy_override"):
        dispatch_handoff(
            runtime,
            Handoff("merge_receipt", "merge_captain", policy_override={"tools": 3}),
            at=AT0,
            context=RouteContext(),
        )
    with pytest.raises(HandoffError, match="no handoff route"):
        dispatch_handoff(runtime, Handoff("nope", "merge_captain"), at=AT0)


def test_supervision_tail_cursor_is_strictly_greater(runtime: PersonaRuntime) -> None:
    runtime.tick("merge_captain", at=AT0)
    runtime.tick("review_captain", at=AT0)
    frames = tail(runtime.log, since_event_id=2)
    assert frames[0]["event_id"] == 3
    only = tail(runtime.log, persona="review_captain")
    assert {f["persona_id"] for f in only} == {"review_captain"}
    assert only[0]["persona_version"] == "0.2.0"
    assert tail(runtime.log, since_event_id=runtime.log.last_event_id()) == []
    assert len(tail(runtime.log, limit=3)) == 3
