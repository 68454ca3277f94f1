"""receipt_policy: required writes every receipt (or fails closed), optional tries,
disabled writes none; the run record carries persona_runtime[] snapshots."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.run import RunOptions, open_session, run_persona
from charter.runtime import EventLogError, LogTransaction, SqliteEventLog

from .conftest import envelope, events, executed, kinds, persona_toml, run_json

MERGE = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}]}
RECEIPT_KINDS = {"persona.tool.executing", "persona.tool.executed"}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("required", RECEIPT_KINDS), ("optional", RECEIPT_KINDS), ("disabled", set())],
)
def test_receipt_policies(
    make_pack: Callable[..., Path], tmp_path: Path, policy: str, expected: set[str]
) -> None:
    pack = make_pack(persona_toml(receipts=policy))
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", MERGE)))
    assert data["status"] == "completed"
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    assert {r["kind"] for r in data["receipts"]} == expected
    assert RECEIPT_KINDS & set(kinds(pack)) == expected
    assert data["receipt_policy"] == policy


class FailingReceipts(SqliteEventLog):
    """A log whose appends of receipt events fail (a full disk, a dropped connection)."""

    @contextmanager
    def write(self, **hints: Any) -> Iterator[LogTransaction]:
        with super().write(**hints) as txn:
            original = txn.append

            def append(batch: Any) -> Any:
                if any(e.kind.startswith("persona.tool.") for e in batch):
                    raise EventLogError("disk full")
                return original(batch)

            txn.append = append  # type: ignore[method-assign]
            yield txn


def _run(pack: Path, log: SqliteEventLog) -> Any:
    return run_persona(
        "actor",
        provider="test",
        kind="go",
        metadata={"id": "1"},
        payload=MERGE,
        options=RunOptions(manifest=pack, log=log, at=datetime(2026, 11, 21, 9, tzinfo=UTC)),
    )


def test_required_receipts_fail_closed(make_pack: Callable[..., Path]) -> None:
    pack = make_pack(persona_toml(receipts="required"))
    log = FailingReceipts(pack / "state")
    try:
        result = _run(pack, log)
    finally:
        log.close()
    assert result.status == "failed"
    assert "disk full" in (result.error or "")
    assert executed(pack) == []  # the side effect never happened


def test_optional_receipts_warn_and_go_on(make_pack: Callable[..., Path]) -> None:
    pack = make_pack(persona_toml(receipts="optional"))
    log = FailingReceipts(pack / "state")
    try:
        result = _run(pack, log)
    finally:
        log.close()
    assert result.status == "completed"
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    assert any("disk full" in w for w in result.warnings)


def test_run_record_carries_persona_runtime_snapshots(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", MERGE)))
    started, finished = data["persona_runtime"]
    assert started["phase"] == "started" and started["lifecycle"] == "running"
    assert finished["phase"] == "finished" and finished["lifecycle"] == "idle"
    assert finished["last_run"]["run_id"] == data["run_id"]
    assert finished["receipts"]["value_receipts"] == 1
    assert {"budget", "handoffs", "queue"} <= set(finished)
    (recorded,) = [e for e in events(pack) if e["kind"] == "persona.run.recorded"]
    record = recorded["payload"]["record"]
    assert record["run_id"] == data["run_id"]
    assert record["persona_runtime"] == data["persona_runtime"]
    assert [r["kind"] for r in record["receipts"]] == [r["kind"] for r in data["receipts"]]


class RecoveredElsewhere(SqliteEventLog):
    """Another process recovers the run's lease (as if its TTL had passed) just before
    the run's first write after its workflow started: after the run last confirmed its
    lease (charter.run.leases), before the receipt that precedes its merge. A partition
    or a pause between the two looks like this."""

    def __init__(self, pack: Path) -> None:
        super().__init__(pack / "state")
        self.pack = pack
        self.recovered = False

    @contextmanager
    def write(self, **kwargs: Any) -> Iterator[LogTransaction]:
        if not self.recovered and (self.pack / "started").exists():
            self.recovered = True
            other = open_session(RunOptions(manifest=self.pack, state_dir=self.pack / "state"))
            try:
                later = datetime(2026, 11, 21, 9, tzinfo=UTC) + timedelta(minutes=10)
                assert other.runtime.expire_leases("actor", at=later)
            finally:
                other.close()
        with super().write(**kwargs) as txn:
            yield txn


@pytest.mark.parametrize("policy", ["required", "optional", "disabled"])
def test_a_run_whose_lease_was_recovered_meanwhile_does_not_act(
    make_pack: Callable[..., Path], policy: str
) -> None:
    """The receipt before a side effect is the fence: written only while the run holds
    its lease, checked in that write's own transaction, whatever the policy (with
    ``disabled`` the check writes nothing). Its twin that keeps its lease merges
    (test_receipt_policies)."""
    pack = make_pack(persona_toml(receipts=policy))
    log = RecoveredElsewhere(pack)
    try:
        result = run_persona(
            "actor",
            provider="test",
            kind="go",
            metadata={"id": "1"},
            payload={"sleep": 0.01, **MERGE},
            options=RunOptions(manifest=pack, log=log, at=datetime(2026, 11, 21, 9, tzinfo=UTC)),
        )
    finally:
        log.close()
    assert log.recovered
    assert executed(pack) == []  # the side effect never happened
    assert result.status == "failed"
    assert "no longer holds its lease" in (result.error or "")
    run = [e["kind"] for e in events(pack) if e["payload"].get("run_id") == result.run_id]
    assert not [k for k in run if k.startswith("persona.tool.")]
    # (issue 31) the recovery offers the work again, naming the run it replaces
    assert run[-3:] == ["persona.lease.expired", "persona.work.retried", "persona.run.recorded"]
