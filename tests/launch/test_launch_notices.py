"""What a real launch tells a user switching from agent-persona (issue 19 item 9 and the
"switching user" notice): removed override flags and unknown placeholders, on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import charter, env_with, make_persona


def test_launch_names_removed_flags_and_unknown_placeholders(project: Path, fakebin: Path) -> None:
    make_persona(
        project / ".personas",
        "p",
        "You are {{persona}} in {{nosuchvar}}.\n",
        policy={"tools": {"deny": ["webfetch"]}},
    )
    capture = project / "argv.json"
    env = env_with(fakebin, FAKE_CLI_CAPTURE=str(capture))
    args = ["launch", "claude", "p", "--", "-p", "hi", "--permission-mode", "bypassPermissions"]
    out = charter(*args, cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.startswith("charter:")]
    removed = [x for x in lines if "removed arguments" in x]
    assert len(removed) == 1 and "--permission-mode bypassPermissions" in removed[0]
    assert any("{{nosuchvar}}" in x for x in lines)
    assert "bypassPermissions" not in json.dumps(json.loads(capture.read_text()))
    quiet = charter(*args, cwd=project, env={**env, "CHARTER_LAUNCH_QUIET": "1"})
    assert quiet.returncode == 0 and "charter:" not in quiet.stderr


def test_no_notice_without_anything_removed(project: Path, fakebin: Path) -> None:
    make_persona(project / ".personas", "p", policy={"tools": {"deny": ["webfetch"]}})
    env = env_with(fakebin, FAKE_CLI_CAPTURE=str(project / "argv.json"))
    out = charter("launch", "claude", "p", "--", "-p", "hi", cwd=project, env=env)
    assert out.returncode == 0 and "charter:" not in out.stderr
