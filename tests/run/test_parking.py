"""A run waiting for an approval parks: no lease, no worker; any serve resumes it by replay
once decided, also after a restart (issue 14 §2, issue 15 "approvals cross hosts")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from charter.run import RunOptions, run_in_session, session_scope

from .conftest import approve_cli, charter_argv, events, executed, persona_toml

TWO = {
    "calls": [
        {"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"},
        {"tool": "github", "args": {"action": "merge", "pr": 8}, "stage": "act"},
    ]
}
AT = datetime(2026, 11, 21, 9, tzinfo=UTC)


def _trigger(pack: Path, plan: dict[str, Any], ident: str = "1") -> dict[str, Any]:
    options = RunOptions(manifest=pack, state_dir=pack / "state", at=AT, park_approvals=True)
    with session_scope(options) as session:
        return run_in_session(
            session, "actor", provider="test", kind="go", metadata={"id": ident}, payload=plan
        ).to_dict()


def _once(pack: Path) -> list[dict[str, Any]]:
    from .conftest import invoke

    result = invoke(["serve", "--once", "--json", "--at", "2026-11-21T09:00:30Z",
                     "--manifest", str(pack), "--state-dir", str(pack / "state")])  # fmt: skip
    assert result.exit_code == 0, result.output
    runs: list[dict[str, Any]] = json.loads(result.stdout)
    return runs


def _status(pack: Path) -> dict[str, Any]:
    from .conftest import persona_cli

    out = persona_cli(pack, "status", "actor", "--json", "--at", "2026-11-21T09:00:40Z")
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_parked_run_holds_nothing_and_replays_without_repeating_effects(
    make_pack: Callable[..., Path],
) -> None:
    pack = make_pack(persona_toml(tier="act_with_approval"))
    first = _trigger(pack, TWO)
    assert first["status"] == "parked" and executed(pack) == []
    run_id = first["run_id"]
    status = _status(pack)
    assert status["leases"] == [] and status["active_runs"] == []  # no lease, no worker
    (parked,) = status["parked_runs"]
    assert parked["run_id"] == run_id and parked["call_id"] == "call_1"

    # the same work key is not started twice; another key runs at once (max_concurrency 1)
    again = _trigger(pack, TWO)
    assert again["status"] == "lease_busy" and "parked" in again["error"]
    other = _trigger(pack, {"calls": []}, ident="2")
    assert other["status"] == "completed"

    assert _once(pack) == []  # undecided: nothing resumes, nothing expires into an allow
    assert approve_cli(pack, "approve", run_id, "call_1").exit_code == 0
    (resumed,) = _once(pack)
    # call_1 ran; call_2 needs its own approval: parked again, same run
    assert resumed["status"] == "parked" and resumed["run_id"] == run_id
    assert executed(pack) == [{"action": "merge", "pr": 7}]

    assert approve_cli(pack, "deny", run_id, "call_2", "--reason", "not 8").exit_code == 0
    (done,) = _once(pack)
    assert done["status"] == "completed" and done["run_id"] == run_id
    statuses = [c["status"] for c in done["tool_calls"]]
    assert statuses == ["replayed", "approval_denied"]
    # replay never executed call_1 again, and call_2 was denied
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    log = events(pack)
    assert [e["kind"] for e in log].count("persona.tool.executing") == 1
    assert [e["kind"] for e in log].count("persona.approval.requested") == 2
    assert [e["kind"] for e in log].count("persona.run.parked") == 2
    assert [e["kind"] for e in log].count("persona.run.unparked") == 2
    assert _status(pack)["parked_runs"] == []


def test_a_replay_that_diverges_fails_closed(make_pack: Callable[..., Path]) -> None:
    pack = make_pack(persona_toml(tier="act_with_approval"))
    first = _trigger(pack, TWO)
    approve_cli(pack, "approve", first["run_id"], "call_1")
    (resumed,) = _once(pack)
    assert resumed["status"] == "parked" and executed(pack) == [{"action": "merge", "pr": 7}]
    # the workflow now calls another tool at call_1 (its code or input changed)
    parked = next(e for e in reversed(events(pack)) if e["kind"] == "persona.run.parked")
    assert parked["payload"]["journal"]["tools"]["call_1"]["tool"] == "github"
    from charter.runtime import open_event_log

    # simulate a changed workflow: the journal says another tool ran at call_1
    log = open_event_log(state_dir=pack / "state")
    try:
        conn = log._conn  # type: ignore[attr-defined]
        payload = dict(parked["payload"])
        payload["journal"]["tools"]["call_1"]["tool"] = "deploy"
        conn.execute("UPDATE events SET payload = ? WHERE event_id = ?",
                     (json.dumps(payload), parked["event_id"]))  # fmt: skip
    finally:
        log.close()
    approve_cli(pack, "approve", first["run_id"], "call_2")
    (failed,) = _once(pack)
    assert failed["status"] == "failed" and "replay diverged" in failed["error"]
    assert executed(pack) == [{"action": "merge", "pr": 7}]  # nothing more ran


def test_serve_parks_survives_kill_9_and_resumes_after_approve_from_another_process(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    import hashlib
    import hmac
    import time
    import urllib.request

    pack = make_pack(persona_toml(tier="act_with_approval"))
    env = {**os.environ, "CHARTER_WEBHOOK_SECRET_TEST": "s"}
    argv = charter_argv("serve", "--port", "0", "--manifest", str(pack),
                        "--state-dir", str(pack / "state"))  # fmt: skip

    def start() -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, start_new_session=True)  # fmt: skip
        assert proc.stdout is not None
        first_line = proc.stdout.readline()  # serve prints nothing before this line
        if not first_line.startswith("listening on"):
            proc.kill()
            raise AssertionError(first_line + proc.communicate()[1])
        return proc, first_line.split()[2]

    def wait_for(kind: str, count: int = 1) -> None:
        for _ in range(600):
            if [e["kind"] for e in events(pack)].count(kind) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"no {kind}")

    proc, base = start()
    try:
        body = json.dumps({"id": "w1", "type": "go", "calls": TWO["calls"][:1]}).encode()
        request = urllib.request.Request(f"{base}/hooks/test", data=body, method="POST")
        digest = hmac.new(b"s", body, hashlib.sha256).hexdigest()
        request.add_header("X-Hub-Signature-256", "sha256=" + digest)
        assert urllib.request.urlopen(request, timeout=10).status == 202
        wait_for("persona.run.parked")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the serve dies while the run is parked
        proc.communicate()
    (pending,) = json.loads(approve_cli(pack, "approve", "--json").stdout)["pending"]
    assert approve_cli(pack, "approve", pending["run_id"], pending["call_id"]).exit_code == 0
    proc, _ = start()  # a fresh serve (any host) takes the decided run up
    try:
        wait_for("persona.run.completed")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    completed = [e for e in events(pack) if e["kind"] == "persona.run.completed"]
    assert completed[0]["payload"]["run_id"] == pending["run_id"]
