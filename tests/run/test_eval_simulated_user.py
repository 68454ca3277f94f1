"""``charter persona eval`` with a simulated user answering the persona's ask_user tool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MANIFEST = """
[[personas]]
name = "clarifier"
description = "Asks before it acts."
entry_workflow = "workflows/clarify.py:run"
tools = ["read", "ask_user"]
autonomy_tier = "act_auto"
receipt_policy = "optional"
triggers = ["test.go"]
evals = ["asks_first"]
"""

WORKFLOW = """
def run(ctx):
    if ctx is None:
        return {"status": "ok"}
    result = ctx.agent("Which environment should I deploy to? Ask the user.",
                       tools=["ask_user"], mock="mock.json")
    return {"answer": result.visible_text, "status": "ok"}
"""

MOCK = [
    {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which environment?"}}]},
    {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Anything else?"}}]},
    "Deploying to staging as the user asked.",
]


def _project(tmp_path: Path, user: str, expect: str) -> Path:
    root = tmp_path / "proj"
    (root / "workflows").mkdir(parents=True)
    (root / "evals").mkdir()
    (root / "charter.toml").write_text(MANIFEST)
    (root / "workflows" / "clarify.py").write_text(WORKFLOW)
    (root / "mock.json").write_text(json.dumps(MOCK))
    (root / "fixture.json").write_text(json.dumps({"provider": "test", "kind": "go"}))
    (root / "evals" / "asks_first.toml").write_text(
        f'fixture = "../fixture.json"\nuser = {user}\nexpect = {expect}\n'
    )
    return root


def _eval(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "charter", "persona", "eval", "clarifier", "--json",
         "--manifest", str(root)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


USER = (
    '[{ match = "*environment*", reply = "staging, never production" },'
    ' { match = "*", action = "stop", reason = "done" }]'
)


def test_a_persona_eval_with_a_simulated_user(tmp_path: Path) -> None:
    root = _project(
        tmp_path, USER,
        '{ status = "completed", user_replies = 1, user_stopped = true,'
        ' output_contains = "staging" }',
    )  # fmt: skip
    proc = _eval(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outcome = json.loads(proc.stdout)["evals"][0]
    kinds = [a["event_type"] for a in outcome["simulated_user"]["audit"]]
    assert kinds == ["simulated_user_reply", "simulated_user_stop"]


def test_a_check_on_the_user_that_does_not_hold_fails(tmp_path: Path) -> None:
    root = _project(tmp_path, USER, "{ user_replies = 2 }")
    proc = _eval(root)
    assert proc.returncode == 1
    checks = json.loads(proc.stdout)["evals"][0]["checks"]
    assert checks == [{"check": "user_replies", "expected": 2, "actual": 1, "ok": False}]


def test_user_checks_without_a_user_are_an_input_error(tmp_path: Path) -> None:
    root = _project(tmp_path, USER, "{ user_replies = 1 }")
    text = (root / "evals" / "asks_first.toml").read_text()
    (root / "evals" / "asks_first.toml").write_text(
        "\n".join(line for line in text.splitlines() if not line.startswith("user ="))
    )
    proc = _eval(root)
    assert proc.returncode == 2
    assert "need a simulated user" in json.loads(proc.stdout)["error"]["message"]
