"""kill -9 in the middle of a run: the log stays consistent and no work is lost (issue 14).

Real processes: ``charter persona run`` is started, killed with SIGKILL while its
workflow runs, and the next processes recover by the documented rule: the dead run's
lease expires (``persona.lease.expired`` before any new acquisition), the run counts as
failed, work queued behind it runs in arrival order, and the failed key may run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .conftest import charter_argv, envelope, events, executed

MERGE = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 2}, "stage": "act"}]}


def _run(pack: Path, payload: Path, *extra: str) -> dict[str, Any]:
    proc = subprocess.run(
        charter_argv("persona", "run", "actor", "--payload", str(payload), "--json",
                     "--manifest", str(pack), "--state-dir", str(pack / "state"), *extra),
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_kill_9_mid_run_loses_nothing(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack()
    slow = envelope(tmp_path / "slow.json", {"sleep": 120}, ident="1")
    victim = subprocess.Popen(
        charter_argv("persona", "run", "actor", "--payload", str(slow),
                     "--manifest", str(pack), "--state-dir", str(pack / "state")),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (pack / "started").exists():
            assert victim.poll() is None, "the victim exited before its workflow started"
            assert time.monotonic() < deadline, "the victim never started its workflow"
            time.sleep(0.05)
        # a different key arrives while the victim holds the only lease: it is queued
        queued = _run(pack, envelope(tmp_path / "merge.json", MERGE, ident="2"))
        assert queued["status"] == "queued"
    finally:
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
    assert executed(pack) == []

    # the next process, after the lease TTL (300 s by default): the expiry is recorded
    # first, then the queued work runs ahead of the newcomer
    later = (datetime.now(UTC) + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    third = _run(pack, envelope(tmp_path / "third.json", {"calls": []}, ident="3"), "--at", later)
    assert [(d["work_key"], d["status"]) for d in third["drained"]] == [
        ("webhook:test:go:2", "completed"),
        ("webhook:test:go:3", "completed"),
    ]
    assert executed(pack) == [{"action": "merge", "pr": 2}]

    log = events(pack)
    kinds = [e["kind"] for e in log]
    acquired = [i for i, k in enumerate(kinds) if k == "persona.lease.acquired"]
    assert kinds.index("persona.lease.expired") < acquired[1]
    # every work key is accounted for exactly once: the victim's as failed (expired)
    outcome: dict[str, list[str]] = {}
    runs = {e["payload"]["run_id"]: e["payload"]["work_key"] for e in log
            if e["kind"] == "persona.run.started"}  # fmt: skip
    for e in log:
        if e["kind"] in ("persona.run.completed", "persona.run.failed"):
            outcome.setdefault(e["payload"]["work_key"], []).append(e["kind"][12:])
        if e["kind"] == "persona.lease.expired":
            outcome.setdefault(runs[e["payload"]["run_id"]], []).append("expired")
    assert outcome == {
        "webhook:test:go:1": ["expired"],
        "webhook:test:go:2": ["completed"],
        "webhook:test:go:3": ["completed"],
    }
    from charter.run import RunOptions, open_session

    session = open_session(RunOptions(manifest=pack, state_dir=pack / "state"))
    try:
        status = session.runtime.status("actor", now=datetime.now(UTC) + timedelta(minutes=10))
        assert status.to_dict()["counters"]["leases_expired"] == 1
    finally:
        session.close()
    # (issue 31) the accepted work is not lost: the expiry offered it again (attempt 2,
    # after its backoff), and the sender's retry of the key joins that attempt
    retried = [e["payload"] for e in log if e["kind"] == "persona.work.retried"]
    assert [(r["work_key"], r["attempt"]) for r in retried] == [("webhook:test:go:1", 2)]
    again = _run(pack, envelope(tmp_path / "again.json", {"calls": []}, ident="1"), "--at", later)
    assert again["status"] == "queued"
