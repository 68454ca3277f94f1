"""A webhook run costs three write transactions (issue 15): the accept, the admission
(recorded running), and the finish with the run's record. A drain with nothing to do
takes no write lock; the record never costs the finish."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.run.engine import RunResult, _lease_fresh, drain_in_session
from charter.run.session import RunOptions, Session, open_session
from charter.runtime import (
    Kind,
    LeaseInfo,
    LogTransaction,
    ReceiptStatus,
    RunReceipt,
    format_time,
)

MANIFEST = """
[[personas]]
name = "worker"
description = "One tool call per webhook."
entry_workflow = "w.py:run"
autonomy_tier = "act_auto"
receipt_policy = "optional"
tools = ["noop"]
triggers = ["bench.go"]
runtime = { max_concurrency = 4, lease_ttl_seconds = 300 }
"""
WORKFLOW = '''
from charter.agent import make_tool


def noop(note: str = "") -> dict:
    """Do nothing."""
    return {"ok": True, "note": note}


def run(ctx):
    ctx.register_tool(make_tool(noop, side_effect_level="read_only"))
    return ctx.call_tool("noop", note=ctx.trigger.work_key)
'''


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    (tmp_path / "charter.toml").write_text(MANIFEST)
    (tmp_path / "w.py").write_text(WORKFLOW)
    opened = open_session(
        RunOptions(
            manifest=str(tmp_path),
            state_dir=str(tmp_path / "state"),
            holder="serve",
            park_approvals=True,
        )
    )
    try:
        yield opened
    finally:
        opened.close()


class Writes:
    """Counts the log's write transactions and what each appended."""

    def __init__(self, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log = session.log
        self.groups: list[list[str]] = []
        original = self.log.write

        @contextmanager
        def write(**hints: Any) -> Iterator[LogTransaction]:
            with original(**hints) as txn:
                before = txn.last_event_id()
                yield txn
                after = txn.last_event_id()
            kinds = {e.event_id: e.kind for e in self.log.read(after=before)}
            self.groups.append([kinds[i] for i in range(before + 1, after + 1)])

        def counted(**hints: Any) -> AbstractContextManager[LogTransaction]:
            return write(**hints)

        monkeypatch.setattr(self.log, "write", counted)


def accept(session: Session, key: str) -> None:
    receipt = session.runtime.trigger(
        "worker", provider="bench", kind="go", at=datetime.now(UTC),
        payload={"id": key, "type": "go"}, defer=True,
    )  # fmt: skip
    assert receipt.status is ReceiptStatus.QUEUED


def test_a_webhook_run_is_three_write_transactions(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = Writes(session, monkeypatch)
    accept(session, "k1")
    (result,) = drain_in_session(session, "worker")
    assert result.status == "completed", result.error
    assert writes.groups == [
        [Kind.TRIGGER_RECEIVED, Kind.WORK_QUEUED],
        [Kind.WORK_DEQUEUED, Kind.LEASE_ACQUIRED, Kind.RUN_STARTED, Kind.RUN_RUNNING],
        [Kind.RUN_COMPLETED, Kind.LEASE_RELEASED, "persona.run.recorded"],
    ]
    # the record describes the finished run, with the status as of its finish
    (recorded,) = [e for e in session.log.read() if e.kind == "persona.run.recorded"]
    record = recorded.payload["record"]
    assert record["status"] == "completed"
    assert record["finish"]["status"] == "completed"
    assert [s["phase"] for s in record["persona_runtime"]] == ["started", "finished"]
    assert record["persona_runtime"][0]["lifecycle"] == "running"
    assert record["persona_runtime"][1]["last_event_id"] == recorded.event_id - 1
    # (taken before the finish's transaction and completed in it: the run's whole record)
    assert record == result.record()
    status = session.runtime.status("worker", now=datetime.now(UTC)).to_dict()
    assert status["lifecycle"] == "idle" and not status["active_runs"]


def test_a_drain_with_nothing_to_do_takes_no_write_lock(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = Writes(session, monkeypatch)
    assert drain_in_session(session, "worker") == []
    assert session.runtime.drain("worker", at=datetime.now(UTC)) == []
    assert writes.groups == []


def test_a_drain_still_recovers_an_expired_lease_with_an_empty_queue(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    held = session.runtime.tick("worker", at=now - timedelta(seconds=400), hold=True)
    assert held.status is ReceiptStatus.STARTED
    writes = Writes(session, monkeypatch)
    assert session.runtime.drain("worker", at=now) == []
    # the recovery and the work offered again (issue 31) are one transaction
    assert writes.groups == [[Kind.LEASE_EXPIRED, Kind.WORK_RETRIED, Kind.WORK_QUEUED]]


def test_the_finish_commits_when_the_record_cannot_be_built_with_it(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the record fails once, inside the finish's transaction: the finish commits alone
    # and the record is written after it, on its own
    calls: list[int] = []
    original = RunResult.record

    def flaky(self: RunResult) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("not this time")
        return original(self)

    monkeypatch.setattr(RunResult, "record", flaky)
    accept(session, "k2")
    writes = Writes(session, monkeypatch)
    (result,) = drain_in_session(session, "worker")
    assert result.status == "completed"
    assert writes.groups[-2:] == [
        [Kind.RUN_COMPLETED, Kind.LEASE_RELEASED],
        ["persona.run.recorded"],
    ]


def test_a_failed_finish_transaction_writes_neither_finish_nor_record(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the store refuses the finish's transaction: nothing of it is written (the run keeps
    # its lease until the TTL, the documented recovery), and the record is tried alone
    accept(session, "k3")
    original = session.runtime.finish_run

    def refused(*args: Any, **kwargs: Any) -> Any:
        def boom(batch: Any, receipt: Any) -> None:
            kwargs["also"](batch, receipt)  # the record is emitted, then the write fails
            raise OSError("disk full")

        return original(*args, **{**kwargs, "also": boom})

    monkeypatch.setattr(session.runtime, "finish_run", refused)
    (result,) = drain_in_session(session, "worker")
    assert result.status == "failed"
    assert any("could not finish run" in w for w in result.warnings)
    kinds = [e.kind for e in session.log.read()]
    assert Kind.RUN_COMPLETED not in kinds and Kind.LEASE_RELEASED not in kinds
    assert kinds.count("persona.run.recorded") == 1  # written alone, after
    assert kinds[-1] == "persona.run.recorded"
    state = session.runtime.state("worker")
    assert len(state.leases) == 1  # still held: expires and is recovered as failed


def _admission(expires_in: float) -> RunReceipt:
    now = datetime(2026, 4, 24, 12, tzinfo=UTC)
    expires = (now + timedelta(seconds=expires_in)).isoformat().replace("+00:00", "Z")
    lease = LeaseInfo("lease_1", "serve", "k", "2026-04-24T12:00:00Z", expires)
    return RunReceipt(ReceiptStatus.STARTED, "worker", "k", "2026-04-24T12:00:00Z", "run_1", lease)


def test_a_fresh_lease_skips_the_first_heartbeat_an_old_one_does_not() -> None:
    now = datetime(2026, 4, 24, 12, tzinfo=UTC)
    assert _lease_fresh(_admission(300), now, 300)
    assert _lease_fresh(_admission(200), now, 300)
    assert not _lease_fresh(_admission(199), now, 300)  # a third of the TTL has passed
    assert not _lease_fresh(
        RunReceipt(ReceiptStatus.STARTED, "worker", "k", "2026-04-24T12:00:00Z"), now, 300
    )


def test_each_item_of_a_long_drain_is_admitted_at_its_own_time(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the clock moves past the whole TTL (300 s) after the drain starts, as it does when
    # earlier items run long: each item is admitted (its lease taken) when it is reached,
    # not at the drain's start; before, the late item's lease was already past its TTL,
    # its first heartbeat found it expired and the error killed the serve worker
    accept(session, "k4")
    accept(session, "k5")
    start = datetime.now(UTC)
    times = iter([start] + [start + timedelta(seconds=400)] * 1000)
    monkeypatch.setattr(session.options, "clock", lambda: lambda: next(times))
    runs = drain_in_session(session, "worker")
    assert [r.status for r in runs] == ["completed", "completed"]
    log = list(session.log.read())
    assert not [e for e in log if e.kind == Kind.LEASE_EXPIRED]
    # fresh at admission: no renewal before the workflow starts (one write fewer)
    assert not [e for e in log if e.kind == Kind.LEASE_RENEWED]
    late = format_time(start + timedelta(seconds=400))
    assert [r.admission["lease"]["acquired_at"] for r in runs] == [late, late]


FINISH = [Kind.RUN_COMPLETED, Kind.LEASE_RELEASED, "persona.run.recorded"]
ADMIT = [Kind.WORK_DEQUEUED, Kind.LEASE_ACQUIRED, Kind.RUN_STARTED, Kind.RUN_RUNNING]


def test_under_a_backlog_each_finish_admits_the_next_item(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain's next item is admitted in the transaction that finishes the run before
    it: two write transactions per queued run, not three (issue 15)."""
    keys = ("k1", "k2", "k3", "k4")
    for key in keys:
        accept(session, key)
    writes = Writes(session, monkeypatch)
    runs = drain_in_session(session, "worker")
    assert [r.status for r in runs] == ["completed"] * 4
    assert [r.work_key for r in runs] == [f"webhook:bench:go:{k}" for k in keys]
    # (the last item alone behind a run is admitted on its own: see the next test)
    assert writes.groups == [ADMIT, FINISH + ADMIT, FINISH + ADMIT, FINISH, ADMIT, FINISH]
    # each record is of its own run's finish, before the next admission
    records = [e for e in session.log.read() if e.kind == "persona.run.recorded"]
    for event in records:
        finished = event.payload["record"]["persona_runtime"][-1]
        assert finished["last_event_id"] == event.event_id - 1
    state = session.runtime.state("worker")
    assert not state.queue and not state.leases and not state.runs


def test_a_drain_limited_to_one_item_admits_no_other(session: Session) -> None:
    accept(session, "k1")
    accept(session, "k2")
    runtime = session.runtime
    finished: list[str] = []

    def execute(receipt: RunReceipt, _item: dict[str, Any]) -> RunReceipt:
        finished.append(receipt.work_key or "")
        return runtime.finish_run("worker", receipt.run_id or "", at=datetime.now(UTC))

    runtime.drain("worker", at=datetime.now(UTC), execute=execute, limit=1)
    assert len(finished) == 1
    state = runtime.state("worker")
    assert [q["work_key"] for q in state.queue] == ["webhook:bench:go:k2"] and not state.runs


def test_a_failing_admission_does_not_cost_the_finish(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admitting the next item raises inside the finish transaction: that transaction is
    rolled back and the run finished alone; the next item is admitted on its own."""
    for key in ("k1", "k2", "k3"):
        accept(session, key)
    runtime = session.runtime
    original = runtime._drain_one
    calls: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the admission inside k1's finish
            raise ValueError("broken admission")
        return original(*args, **kwargs)

    monkeypatch.setattr(runtime, "_drain_one", flaky)
    writes = Writes(session, monkeypatch)
    runs = drain_in_session(session, "worker")
    assert [r.status for r in runs] == ["completed"] * 3, [r.error for r in runs]
    assert writes.groups == [ADMIT, FINISH, ADMIT, FINISH, ADMIT, FINISH]


def test_an_admitted_item_the_drain_cannot_run_is_failed_at_once(session: Session) -> None:
    """The executor raises after its run's finish admitted the next item: that run is
    failed now, with the reason, not left holding a lease until it expires."""
    for key in ("k1", "k2", "k3", "k4"):
        accept(session, key)
    runtime = session.runtime

    def execute(receipt: RunReceipt, _item: dict[str, Any]) -> RunReceipt:
        runtime.finish_run("worker", receipt.run_id or "", at=datetime.now(UTC))
        raise RuntimeError("the worker is going away")

    with pytest.raises(RuntimeError, match="going away"):
        runtime.drain("worker", at=datetime.now(UTC), execute=execute)
    ends = {
        e.payload["work_key"]: (e.kind, e.payload.get("error"))
        for e in session.log.read()
        if e.kind in (Kind.RUN_COMPLETED, Kind.RUN_FAILED)
    }
    assert ends["webhook:bench:go:k1"] == (Kind.RUN_COMPLETED, None)
    kind, error = ends["webhook:bench:go:k2"]
    assert kind == Kind.RUN_FAILED and "not started" in error and "going away" in error
    state = runtime.state("worker")
    assert [q["work_key"] for q in state.queue] == ["webhook:bench:go:k3", "webhook:bench:go:k4"]
    assert not state.runs and not state.leases


def test_one_item_behind_a_run_is_left_to_the_worker_woken_for_it(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A single waiting item is not taken by the finish (the replica that queued it woke
    a worker of its own for it): admitted on its own, as before."""
    accept(session, "k1")
    accept(session, "k2")
    writes = Writes(session, monkeypatch)
    runs = drain_in_session(session, "worker")
    assert [r.status for r in runs] == ["completed"] * 2
    assert writes.groups == [ADMIT, FINISH, ADMIT, FINISH]


def test_a_persona_running_one_at_a_time_admits_with_its_finish_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``max_concurrency = 1`` the running item holds the only slot; its finish frees
    it, so the finish admits the next item all the same."""
    (tmp_path / "charter.toml").write_text(
        MANIFEST.replace("max_concurrency = 4", "max_concurrency = 1")
    )
    (tmp_path / "w.py").write_text(WORKFLOW)
    single = open_session(
        RunOptions(manifest=str(tmp_path), state_dir=str(tmp_path / "state"), holder="serve",
                   park_approvals=True)
    )  # fmt: skip
    try:
        for key in ("k1", "k2", "k3"):
            accept(single, key)
        writes = Writes(single, monkeypatch)
        runs = drain_in_session(single, "worker")
        assert [r.status for r in runs] == ["completed"] * 3
        assert writes.groups == [ADMIT, FINISH + ADMIT, FINISH, ADMIT, FINISH]
    finally:
        single.close()
