"""A live run keeps its lease; a run that lost it stops before its next side effect.

The recovery rule (docs/runtime.md) expires a lease that went ``lease_ttl_seconds``
without a heartbeat: meant for dead processes. Before ``charter.run.leases``, a live run
longer than its TTL was expired too (another process admitted past it, and its own
finish failed); and a run whose lease was expired elsewhere went on to merge.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from charter.run import RunOptions, open_session
from charter.run.leases import LeaseKeeper, LeaseLost
from charter.runtime import ReceiptStatus

from .conftest import charter_argv, envelope, events, executed, persona_cli, persona_toml
from .test_crash_recovery import _run

TTL = "runtime = { lease_ttl_seconds = 2, max_concurrency = 1 }"
MERGE = {"tool": "github", "args": {"action": "merge", "pr": 5}, "stage": "act"}


def _start(pack: Path, payload: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        charter_argv("persona", "run", "actor", "--payload", str(payload), "--json",
                     "--manifest", str(pack), "--state-dir", str(pack / "state")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _wait_started(pack: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not (pack / "started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the workflow never started"
        time.sleep(0.02)


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 1), err
    data: dict[str, Any] = json.loads(out)
    return data


def test_a_run_longer_than_its_lease_keeps_it(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack(persona_toml(extra=TTL))
    victim = _start(pack, envelope(tmp_path / "long.json", {"sleep": 4.5}, ident="long"))
    _wait_started(pack, victim)
    time.sleep(3)  # past the 2 s TTL of the admission
    other = _run(pack, envelope(tmp_path / "other.json", {"calls": []}, ident="other"))
    # the long run still holds the only slot: the newcomer waits instead of passing it
    assert other["status"] == "queued"
    long = _finish(victim)
    assert long["status"] == "completed", long
    kinds = [e["kind"] for e in events(pack)]
    assert "persona.lease.expired" not in kinds
    assert kinds.count("persona.lease.renewed") >= 3  # the first heartbeat, then every second


def test_a_run_whose_lease_was_expired_elsewhere_does_not_merge(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack(persona_toml(extra=TTL))
    plan = {"sleep": 5.0, "calls": [MERGE]}
    # (5 s: the other process must start and expire the lease before the merge, also on
    # a loaded machine; the keeper notices within a second of the expiry)
    victim = _start(pack, envelope(tmp_path / "v.json", plan, ident="victim"))
    _wait_started(pack, victim)
    # a replica whose clock is past the lease (as after a partition or a pause) expires
    # it and admits its own work in the freed slot
    later = (datetime.now(UTC) + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    other = _run(pack, envelope(tmp_path / "o.json", {"calls": []}, ident="o"), "--at", later)
    assert other["status"] == "completed"
    result = _finish(victim)
    assert result["status"] == "failed"
    assert "lease lost" in (result["error"] or "")
    assert executed(pack) == []  # the merge never ran
    kinds = [e["kind"] for e in events(pack)]
    assert kinds.count("persona.lease.expired") == 1


def test_the_allowed_twin_merges(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack(persona_toml(extra=TTL))
    plan = {"sleep": 3.5, "calls": [MERGE]}
    result = _finish(_start(pack, envelope(tmp_path / "v.json", plan, ident="victim")))
    assert result["status"] == "completed", result
    assert executed(pack) == [{"action": "merge", "pr": 5}]


# -- the synchronous check, with an injected monotonic clock -----------------------------


@pytest.fixture
def held(make_pack: Callable[..., Path]) -> Any:
    pack = make_pack(persona_toml(extra=TTL))
    session = open_session(RunOptions(manifest=pack, state_dir=pack / "state"))
    at = datetime(2026, 11, 21, 9, tzinfo=UTC)
    receipt = session.runtime.tick("actor", at=at, hold=True)
    assert receipt.status is ReceiptStatus.STARTED and receipt.run_id is not None
    yield session, receipt.run_id, at
    session.close()


def _keeper(session: Any, run_id: str, at: datetime, now: list[float]) -> LeaseKeeper:
    return LeaseKeeper(
        session.runtime, "actor", run_id, ttl_seconds=2, clock=lambda: at,
        monotonic=lambda: now[0],
    )  # fmt: skip


def test_check_renews_a_stale_lease_and_passes(held: Any) -> None:
    session, run_id, at = held
    now = [0.0]
    keeper = _keeper(session, run_id, at, now)
    keeper.check()
    assert keeper.renewals == 0  # fresh: no round trip
    now[0] = 1.5  # past half the TTL
    keeper.check()
    assert keeper.renewals == 1 and keeper.lost is None


def test_check_stops_a_run_whose_lease_is_gone(held: Any) -> None:
    session, run_id, at = held
    now = [0.0]
    keeper = _keeper(session, run_id, at, now)
    # another process, later, expires the lease (the holder was paused meanwhile)
    later = at + timedelta(seconds=30)
    session.runtime.tick("actor", at=later, hold=True)
    now[0] = 30.0
    with pytest.raises(LeaseLost, match="lease lost"):
        keeper.check()
    with pytest.raises(LeaseLost):  # and it stays lost
        keeper.check()


def test_an_unreachable_log_fails_closed_once_past_the_ttl(held: Any) -> None:
    session, run_id, at = held
    now = [0.0]
    keeper = _keeper(session, run_id, at, now)

    class Down:
        personas = session.runtime.personas

        def heartbeat(self, *_: Any, **__: Any) -> None:
            raise OSError("connection refused")

    keeper.runtime = Down()  # type: ignore[assignment]
    now[0] = 1.5
    keeper.check()  # cannot tell yet, still inside the TTL: carry on
    now[0] = 2.5
    with pytest.raises(LeaseLost, match="unconfirmed"):
        keeper.check()


def test_no_keeper_thread_outlives_its_run(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack(persona_toml(extra=TTL))
    payload = envelope(tmp_path / "e.json", {"calls": []})
    result = persona_cli(pack, "run", "actor", "--payload", str(payload), "--json")
    assert json.loads(result.stdout)["status"] == "completed", result.output
    assert not [t for t in threading.enumerate() if t.name.startswith("charter-lease-")]
