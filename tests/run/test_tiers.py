"""Autonomy tiers are enforced in-process on side-effecting calls (policy first, then tier)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from .conftest import (
    AT,
    approve_cli,
    charter_argv,
    envelope,
    events,
    executed,
    kinds,
    persona_cli,
    run_json,
)

MERGE = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 7}, "stage": "act"}]}
READ = {"tool": "read", "args": {"path": "context/rules.md"}, "stage": "look"}


def test_act_auto_executes_with_receipts(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack()
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", MERGE)))
    assert data["status"] == "completed"
    autonomy = data["autonomy"]
    assert {k: autonomy[k] for k in ("declared", "effective", "reason", "arm", "standing")} == {
        "declared": "act_auto",
        "effective": "act_auto",
        "reason": "autonomy_tier = act_auto",
        "arm": "outside",  # no rollout_policy: every run is outside a rollout
        "standing": None,
    }
    assert autonomy["rollout"]["capped"] is False
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    assert [r["kind"] for r in data["receipts"]] == [
        "persona.tool.executing",
        "persona.tool.executed",
    ]
    assert data["receipts"][0]["stage"] == "act"
    assert data["result"]["packs"] == ["rules"]


def test_shadow_executes_nothing_and_leaves_dry_run_receipts(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    plan = {"calls": [READ, *MERGE["calls"]]}
    data = run_json(
        pack, "actor", "--tier", "shadow", "--payload", str(envelope(tmp_path / "e.json", plan))
    )
    assert data["status"] == "completed"
    assert data["autonomy"]["effective"] == "shadow"
    assert executed(pack) == []
    read_result, merge_result = data["result"]["results"]
    assert "Be careful" in read_result  # read_only calls run in every tier
    assert merge_result["status"] == "dry_run" and merge_result["executed"] is False
    (dry,) = data["dry_runs"]
    assert dry["tool"] == "github" and dry["arguments"] == {"action": "merge", "pr": 7}
    assert "persona.tool.dry_run" in kinds(pack)
    assert "persona.tool.executing" not in kinds(pack)


def test_rollout_mode_caps_the_tier(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    from .conftest import persona_toml

    pack = make_pack(persona_toml(extra='rollout_policy = { mode = "dry_run" }'))
    data = run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", MERGE)))
    assert data["autonomy"]["effective"] == "shadow"
    assert "rollout_policy.mode = dry_run" in data["autonomy"]["reason"]
    assert executed(pack) == []


def test_suggest_returns_proposals(make_pack: Callable[..., Path], tmp_path: Path) -> None:
    pack = make_pack()
    data = run_json(
        pack, "actor", "--tier", "suggest", "--payload", str(envelope(tmp_path / "e.json", MERGE))
    )
    assert executed(pack) == []
    (proposal,) = data["proposals"]
    assert proposal["tool"] == "github" and proposal["receipt_id"]
    assert data["result"]["results"][0]["status"] == "proposed"


def test_policy_denial_comes_first_with_a_receipt(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    # github inside the read-only "look" stage: the stage frame denies it; no tier involved
    plan = {"calls": [{"tool": "github", "args": {"action": "merge", "pr": 1}, "stage": "look"}]}
    data = run_json(
        pack, "actor", "--tier", "shadow", "--payload", str(envelope(tmp_path / "e.json", plan))
    )
    assert data["dry_runs"] == []
    (denied,) = data["denied"]
    assert denied["status"] == "permission_denied"
    assert denied["receipt"]["frame"] == "stage:look"
    assert denied["receipt_id"]
    assert "persona.tool.denied" in kinds(pack)


def test_approval_expires_into_a_denial_never_an_allow(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    data = run_json(
        pack,
        "actor",
        "--tier",
        "act_with_approval",
        "--approval-timeout",
        "0",
        "--payload",
        str(envelope(tmp_path / "e.json", MERGE)),
    )
    assert executed(pack) == []
    (approval,) = data["approvals"]
    assert approval["status"] == "expired"
    assert data["result"]["results"][0]["status"] == "approval_expired"
    assert "persona.approval.expired" in kinds(pack)
    # a late decision is refused: the approval was already decided
    late = approve_cli(pack, "approve", data["run_id"], approval["call_id"], "--at", AT)
    assert late.exit_code == 1 and "already expired" in late.output


def _start_waiting_run(pack: Path, plan_file: Path) -> subprocess.Popen[str]:
    argv = charter_argv(
        "persona", "run", "actor", "--tier", "act_with_approval", "--no-input",
        "--payload", str(plan_file), "--json", "--at", AT,
        "--manifest", str(pack), "--state-dir", str(pack / "state"),
    )  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _pending(pack: Path, proc: subprocess.Popen[str]) -> dict[str, str]:
    for _ in range(600):  # polls for an event, not for time
        listing = approve_cli(pack, "approve", "--json")
        pending = json.loads(listing.stdout)["pending"]
        if pending:
            return dict(pending[0])
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("no pending approval appeared")


def test_approval_resolved_by_a_second_process(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    proc = _start_waiting_run(pack, envelope(tmp_path / "e.json", MERGE))
    try:
        item = _pending(pack, proc)
        assert item["tool"] == "github" and item["stage"] == "act"
        assert executed(pack) == []  # nothing runs while the approval is pending
        # the durable request says ASK: the policy allowed it, the tier asks
        request = next(e for e in events(pack) if e["kind"] == "persona.approval.requested")
        assert request["payload"]["decision"]["decision"] == "ask"
        granted = approve_cli(
            pack, "approve", item["run_id"], item["call_id"], "--by", "alice", "--at", AT
        )
        assert granted.exit_code == 0, granted.output
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    data = json.loads(out)
    assert data["status"] == "completed"
    assert data["approvals"][0]["status"] == "granted" and data["approvals"][0]["by"] == "alice"
    assert executed(pack) == [{"action": "merge", "pr": 7}]
    again = approve_cli(pack, "approve", item["run_id"], item["call_id"], "--at", AT)
    assert again.exit_code == 1 and "already granted" in again.output


def test_denied_approval_does_not_execute_and_routes_approval_denied(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    from .conftest import persona_toml

    routes = """
[[handoff_routes]]
id = "after-merge"
kind = "merge_receipt"
from = "actor"
route = [
  { target = "human:maintainers", when = "approval_denied" },
  { target = "other", when = "always" },
]
"""
    pack = make_pack(
        persona_toml(handoffs='["other", "human:maintainers"]'),
        persona_toml("other", tier="shadow"),
        routes=routes,
    )
    plan = {**MERGE, "handoffs": [{"kind": "merge_receipt", "payload": {"pr": 7}}]}
    proc = _start_waiting_run(pack, envelope(tmp_path / "e.json", plan))
    try:
        item = _pending(pack, proc)
        denied = approve_cli(
            pack, "deny", item["run_id"], item["call_id"], "--reason", "freeze", "--at", AT
        )
        assert denied.exit_code == 0, denied.output
        out, _err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    data = json.loads(out)
    assert executed(pack) == []
    assert data["approvals"][0]["status"] == "denied"
    assert data["approvals"][0]["reason"] == "freeze"
    (handoff,) = data["handoffs"]
    assert handoff["target"] == "human:maintainers" and handoff["when"] == "approval_denied"


def test_approve_refuses_unknown_and_finished_runs(
    make_pack: Callable[..., Path], tmp_path: Path
) -> None:
    pack = make_pack()
    run_json(pack, "actor", "--payload", str(envelope(tmp_path / "e.json", MERGE)))
    unknown = approve_cli(pack, "approve", "run_1", "call_9", "--at", AT)
    assert unknown.exit_code == 1 and "no approval was requested" in unknown.output
    usage = approve_cli(pack, "approve", "run_1")
    assert usage.exit_code == 2
    empty = approve_cli(pack, "approve")
    assert empty.exit_code == 0 and "no pending approvals" in empty.output
    assert persona_cli(pack, "status", "actor", "--at", AT).exit_code == 0
