"""approval_policy / permissions / on_escalation / approval_store inside agent_loop.

Every hostile case checks the file on disk (the effect), and has an allowed twin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop, builtin_tools
from charter.policy import BUILTIN_TOOLS, PolicyError, ToolCall
from charter.policy.approval import ApprovalPolicy, CallFacts

from .conftest import tc

ASK_WRITES = {
    "rules": [
        {
            "name": "writes-need-ok",
            "decision": "ask",
            "match": {"side_effect_level": "workspace_write"},
        },
        {"name": "no-secrets-dir", "decision": "deny", "match": {"paths": ["secrets/**"]}},
    ]
}


def _events(result: Any, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.trace["events"] if e["type"] == kind]


def _write_script(*paths: str) -> list[Any]:
    return [tc("write", path=p, content=f"data:{p}") for p in paths] + ["done"]


def _loop(ws: Path, script: list[Any], **options: Any) -> Any:
    return agent_loop(
        "go",
        provider=MockProvider(script),
        tools=builtin_tools(str(ws), names=("read", "write", "bash")),
        workspace=str(ws),
        **options,
    )


def test_ask_without_an_approver_fails_closed(tmp_path: Path) -> None:
    result = _loop(tmp_path, _write_script("a.txt"), approval_policy=ASK_WRITES)
    assert not (tmp_path / "a.txt").exists()
    assert result.tools.rejected == ["write"]
    deny = _events(result, "PermissionDeny")[0]
    assert deny["policyDecision"]["rule"] == "writes-need-ok"
    assert "no on_escalation or approval_store" in deny["reason"]
    # the allowed twin: a read-only call is not asked about
    (tmp_path / "r.txt").write_text("hello")
    twin = _loop(tmp_path, [tc("read", path="r.txt"), "done"], approval_policy=ASK_WRITES)
    assert twin.tools.successful == ["read"] and not _events(twin, "PermissionEscalation")


def test_deny_rule_wins_over_ask_and_over_a_granting_host(tmp_path: Path) -> None:
    asked: list[Any] = []
    result = _loop(
        tmp_path,
        _write_script("secrets/k.txt", "ok.txt"),
        approval_policy=ASK_WRITES,
        on_escalation=lambda req: asked.append(req) or {"grant": "once"},
    )
    assert not (tmp_path / "secrets" / "k.txt").exists()
    assert (tmp_path / "ok.txt").read_text() == "data:ok.txt"
    assert [r.tool for r in asked] == ["write"]  # only the ok.txt write was escalated
    assert asked[0].policyDecision["rule"] == "writes-need-ok"
    assert _events(result, "PermissionDeny")[0]["policyDecision"]["rule"] == "no-secrets-dir"


def test_grant_once_asks_again_grant_session_does_not(tmp_path: Path) -> None:
    asked: list[str] = []

    def once(req: Any) -> Any:
        asked.append(req.arguments["path"])
        return {"grant": "once"}

    _loop(tmp_path, _write_script("a", "b"), approval_policy=ASK_WRITES, on_escalation=once)
    assert asked == ["a", "b"]
    asked.clear()

    def session(req: Any) -> Any:
        asked.append(req.arguments["path"])
        return {"grant": "session"}

    result = _loop(
        tmp_path, _write_script("c", "d"), approval_policy=ASK_WRITES, on_escalation=session
    )
    assert asked == ["c"] and (tmp_path / "d").exists()
    grants = _events(result, "PermissionGrant")
    assert [g["grant"] for g in grants] == ["session", "session"]
    assert grants[1].get("cached") is True


def test_on_escalation_false_refuses_and_true_grants(tmp_path: Path) -> None:
    refused = _loop(
        tmp_path, _write_script("x"), approval_policy=ASK_WRITES, on_escalation=lambda r: False
    )
    assert not (tmp_path / "x").exists() and refused.tools.rejected == ["write"]
    obs = next(m for m in refused.transcript["messages"] if m["role"] == "tool")["content"]
    assert "permission_denied" in obs and "on_escalation refused" in obs
    granted = _loop(
        tmp_path, _write_script("y"), approval_policy=ASK_WRITES, on_escalation=lambda r: True
    )
    assert (tmp_path / "y").exists() and granted.tools.successful == ["write"]


def test_permissions_allow_list_escalates_the_rest_and_deny_wins(tmp_path: Path) -> None:
    script = [
        tc("bash", command="echo hi > hi.txt"),
        tc("write", path="w.txt", content="w"),
        tc("write", path="blocked.txt", content="b"),
        "done",
    ]
    asked: list[str] = []
    result = _loop(
        tmp_path,
        script,
        permissions={
            "allow": ["write"],
            "deny": [{"tool": "write", "args": {"path": "blocked*"}}],
        },
        on_escalation=lambda req: asked.append(req.tool) or False,
        policy={"sandbox": "off"},
    )
    assert asked == ["bash"]  # not in the allow list: escalated, refused
    assert not (tmp_path / "hi.txt").exists()
    assert (tmp_path / "w.txt").exists()
    assert not (tmp_path / "blocked.txt").exists()
    assert result.tools.rejected == ["bash", "write"]


def test_permissions_predicate(tmp_path: Path) -> None:
    big = lambda args: len(str(args.get("content", ""))) > 10  # noqa: E731
    _loop(
        tmp_path,
        [tc("write", path="s", content="short"), tc("write", path="l", content="x" * 50), "done"],
        permissions={"deny": [big]},
    )
    assert (tmp_path / "s").exists() and not (tmp_path / "l").exists()


def test_calls_at_least_asks_after_n_calls(tmp_path: Path) -> None:
    policy = {
        "rules": [
            {
                "name": "burst",
                "decision": "deny",
                "match": {"tools": ["write"], "calls_at_least": 2},
            }
        ]
    }
    _loop(tmp_path, _write_script("1", "2", "3"), approval_policy=policy)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1", "2"]


def test_external_roots_extend_the_workspace(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    target = str(outside / "o.txt")
    tools = builtin_tools(str(ws), names=("write",))
    denied = agent_loop(
        "go",
        provider=MockProvider([tc("write", path=target, content="z"), "done"]),
        tools=tools,
        workspace=str(ws),
    )
    assert not os.path.exists(target) and denied.tools.rejected == ["write"]
    allowed = agent_loop(
        "go",
        provider=MockProvider([tc("write", path=target, content="z"), "done"]),
        tools=tools,
        workspace=str(ws),
        external_roots=[str(outside)],
    )
    assert Path(target).read_text() == "z" and allowed.tools.successful == ["write"]


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(AgentOptionError, match=r"approval_policy.*rules\[0\]\.decision"):
        agent_loop("x", approval_policy={"rules": [{"decision": "maybe"}]})
    with pytest.raises(AgentOptionError, match=r"rules\[0\]\.match\.commands"):
        agent_loop("x", approval_policy={"rules": [{"decision": "ask", "match": {"commands": 3}}]})
    with pytest.raises(AgentOptionError, match=r"on_escalation.*nothing would ever ask"):
        agent_loop("x", on_escalation=lambda r: True)
    with pytest.raises(AgentOptionError, match="approval_store"):
        agent_loop("x", approval_policy=ASK_WRITES, approval_store={"persona": "p"})
    with pytest.raises(AgentOptionError, match="external_roots"):
        agent_loop("x", external_roots="/tmp")


def test_rule_matching_needs_the_named_subject() -> None:
    policy = ApprovalPolicy.from_dict(
        {"rules": [{"name": "push", "decision": "ask", "match": {"commands": ["git push:*"]}}]}
    )
    bash = BUILTIN_TOOLS["bash"]
    assert (
        policy.decide(ToolCall("bash", {"command": "git push origin main"}, bash)).outcome == "ask"
    )
    assert policy.decide(ToolCall("bash", {"command": "cd x && git push"}, bash)).outcome == "ask"
    assert policy.decide(ToolCall("bash", {"command": "git status"}, bash)).outcome == "allow"
    # a commands match never matches a tool that runs no command
    read = ToolCall("read", {"file_path": "x"}, BUILTIN_TOOLS["read"])
    assert policy.decide(read).outcome == "allow"
    with pytest.raises(PolicyError):
        ApprovalPolicy.from_dict({"rules": [{"decision": "ask", "bogus": 1}]})
    assert CallFacts().calls_before == 0


def _approve(state: Path, verb: str, run_id: str, call_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "charter",
            verb,
            run_id,
            call_id,
            "--state-dir",
            str(state),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _pending(state: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "charter", "approve", "--state-dir", str(state), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    return list(data["pending"] if isinstance(data, dict) else data)


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_durable_ask_is_answered_from_another_process(tmp_path: Path, verb: str) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.append(
            _loop(
                ws,
                _write_script("deploy.txt"),
                approval_policy=ASK_WRITES,
                approval_store={"state_dir": str(state), "persona": "builder", "timeout": 60},
                session_id="sess-durable",
            )
        )
    )
    worker.start()
    pending: list[dict[str, Any]] = []
    for _ in range(200):
        if state.exists():
            pending = _pending(state)
            if pending:
                break
        time.sleep(0.1)
    assert pending and pending[0]["run_id"] == "sess-durable" and pending[0]["tool"] == "write"
    assert not (ws / "deploy.txt").exists()  # nothing runs while it waits
    out = _approve(state, verb, "sess-durable", pending[0]["call_id"])
    assert out.returncode == 0, out.stderr
    worker.join(60)
    result = results[0]
    assert (ws / "deploy.txt").exists() is (verb == "approve")
    assert result.status == "done"
    kinds = [e["type"] for e in result.trace["events"] if e["type"].startswith("Permission")]
    assert kinds == [
        "PermissionEscalation",
        "PermissionGrant" if verb == "approve" else "PermissionDeny",
    ]


def test_durable_ask_expires_into_a_refusal_never_an_allow(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    result = _loop(
        ws,
        _write_script("late.txt"),
        approval_policy=ASK_WRITES,
        approval_store={"state_dir": str(state), "timeout": 0.3},
        session_id="sess-expire",
    )
    assert not (ws / "late.txt").exists()
    deny = _events(result, "PermissionDeny")[0]
    assert deny["status"] == "expired"
    # a late approval is refused: nothing waits any more
    call_id = [e for e in result.trace["events"] if e["type"] == "PermissionEscalation"]
    assert call_id
    assert _pending(state) == []
