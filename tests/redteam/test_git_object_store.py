"""Class 8 (issue 29): denied files through git's object store.

``secrets/token.txt`` is denied and tracked. git commands that print blobs by path name
are judged against ``paths.deny`` for the paths they name; the receipt, ``charter persona
check`` and ``charter doctor`` say that a denied path is tracked. The twin: the same git
commands on a public file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import commit_twice, run_loop, tc

pytestmark = pytest.mark.needs_sandbox

POLICY: dict[str, Any] = {
    "commands": {"allow": ["git:*", "cat:*"]},
    "paths": {"allow": ["./"], "deny": ["./secrets/**"]},
    "network": {"deny": ["*"]},
}

HOSTILE = [
    "git show HEAD:secrets/token.txt",
    "git show HEAD~1:./secrets/token.txt",
    "git show :secrets/token.txt",
    "git show :0:secrets/token.txt",
    "git cat-file -p :secrets/token.txt",
    "git cat-file blob HEAD:secrets/token.txt",
    "git log -p -- secrets",
    "git log -p --follow secrets/token.txt",
    "git diff HEAD~1 HEAD -- secrets/token.txt",
    "git diff HEAD~1:secrets/token.txt HEAD:notes.txt",
    "git archive HEAD secrets | tar -xO",
    "git grep TOKEN HEAD -- secrets",
    "git blame secrets/token.txt",
    "git -C . show HEAD:secrets/token.txt",
    "echo HEAD:secrets/token.txt | git cat-file --batch",
]


@pytest.fixture
def repo(ws: Path) -> Path:
    return commit_twice(ws, ["-A"], ws / "notes.txt", "public notes, again\n")


def test_git_commands_naming_a_denied_path_are_denied(repo: Path) -> None:
    obs = run_loop(repo, POLICY, *(tc("bash", command=line) for line in HOSTILE))
    for line, seen in zip(HOSTILE, obs, strict=True):
        assert "hunter2" not in seen, (line, seen)
        assert "permission_denied" in seen, (line, seen)


def test_twin_git_commands_on_public_paths_run_and_the_receipt_warns(repo: Path) -> None:
    obs = run_loop(
        repo,
        POLICY,
        tc("bash", command="git show HEAD:notes.txt"),
        tc("bash", command="git cat-file -p HEAD~1:notes.txt"),
        tc("bash", command="git log -p --format=%s -- notes.txt"),
    )
    assert "public notes, again" in obs[0]
    assert "public notes" in obs[1]
    assert "two" in obs[2] and "one" in obs[2]
    receipt = json.loads(obs[0])["sandbox"]
    assert any("git tracks 2 path(s)" in n and "secrets/token.txt" in n for n in receipt["notes"])


MANIFEST = """\
[[personas]]
name = "coder"
description = "d"
version = "1.0.0"
entry_workflow = "flows/coder.py:run"
autonomy_tier = "act_auto"
receipt_policy = "required"
tools = ["read", "bash"]

[personas.policy]
paths = { allow = ["./"], deny = ["./secrets/**"] }
commands = { allow = ["git:*"] }
"""


def _charter(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "charter", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_persona_check_and_doctor_say_a_denied_path_is_tracked(repo: Path) -> None:
    (repo / "charter.toml").write_text(MANIFEST)
    (repo / "flows").mkdir()
    (repo / "flows" / "coder.py").write_text("def run(ctx):\n    return None\n")
    check = _charter(repo, "persona", "check", "--json")
    assert check.returncode == 0, check.stderr
    report = json.loads(check.stdout)
    warnings = report["warnings"]
    assert report["warning_counts"].get("tracked_denied_path") == 1, report
    assert any(
        "persona coder: git tracks 2 path(s)" in w and "secrets/token.txt" in w for w in warnings
    )
    doctor = json.loads(_charter(repo, "doctor", "--json").stdout)
    [tracked] = [c for c in doctor if c["check"] == "tracked denied paths: coder"]
    assert tracked["status"] == "warn" and "secrets/token.txt" in tracked["detail"]
    # the twin: once the secret is no longer tracked, nothing is said
    subprocess.run(["git", "rm", "-q", "--cached", "-r", "secrets"], cwd=repo, check=True)
    check = _charter(repo, "persona", "check", "--json")
    assert not any("git tracks" in w for w in json.loads(check.stdout)["warnings"])
    doctor = json.loads(_charter(repo, "doctor", "--json").stdout)
    assert not [c for c in doctor if c["check"].startswith("tracked denied paths")]


def test_object_names_are_rooted_at_the_work_tree_top(ws: Path) -> None:
    """The workspace is a subdirectory of the repository: ``HEAD:ws/secrets/token.txt``
    names the workspace's denied file from the top of the work tree."""
    top = ws.parent
    for args in (["init", "-q", "-b", "main"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=top, check=True, capture_output=True)
    subprocess.run(
        ["git", "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "x"],
        cwd=top,
        check=True,
        capture_output=True,
    )
    policy = {**POLICY, "paths": {"allow": ["../"], "deny": ["./secrets/**"]}}
    obs = run_loop(
        ws,
        policy,
        tc("bash", command="git show HEAD:ws/secrets/token.txt"),
        tc("bash", command="git cat-file -p :ws/secrets/token.txt"),
        tc("bash", command="git show HEAD:./secrets/token.txt"),
        tc("bash", command="git show HEAD:ws/notes.txt"),
        confine_to_workspace=False,
    )
    for hostile in obs[:3]:
        assert "hunter2" not in hostile and "permission_denied" in hostile, hostile
    assert "public notes" in obs[3], obs[3]
