"""Class 3 of issue 29: files that run later, outside any sandbox.

A call must not leave behind what the user's next plain command runs on the host: git's
config and hooks (also after renaming ``.git`` and recreating it), editor tasks, MCP
configs, shell start-up files. The shell is held by the kernel (read-only mounts; each
directory above a protected path is a mount point, so it cannot be renamed), the
``write``/``edit`` tools by the policy (a write to a listed path is refused unless the
policy names it). Each hostile case checks the host; the allowed twins must still work.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from charter.policy import RUNS_LATER

from .conftest import POLICY, run, sh, tc, text

pytestmark = pytest.mark.needs_sandbox

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("print('hi')\n")
    subprocess.run([*GIT, "init", "-q"], cwd=ws, check=True)
    subprocess.run([*GIT, "add", "app.py"], cwd=ws, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "init"], cwd=ws, check=True)
    for key, value in (("user.email", "t@example.com"), ("user.name", "t")):
        subprocess.run(["git", "config", key, value], cwd=ws, check=True)
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "tasks.json").write_text("{}\n")
    (ws / ".mcp.json").write_text("{}\n")
    return ws


def _user_runs_git_status(ws: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "status", "--short"], cwd=ws, capture_output=True, text=True)


def test_rename_and_recreate_git_does_not_plant_fsmonitor(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    config_before = (repo / ".git" / "config").read_text()
    fsmonitor = f"[core]\\n\\tfsmonitor = touch {marker} #\\n"
    obs = run(
        repo,
        # rename .git aside, recreate it, plant core.fsmonitor in the new one
        sh(
            "python3 -c \"import os, shutil; os.rename('.git', 'g2'); "
            "shutil.copytree('g2', '.git'); "
            f"open('.git/config', 'a').write('{fsmonitor}')\"; echo rc=$?"
        ),
        sh("mv .git g3; mkdir g4; mv .git/hooks g4/; echo rc=$?"),
        sh(f"python3 -c \"open('.git/config', 'a').write('{fsmonitor}')\"; echo rc=$?"),
        sh("echo 'touch " + str(marker) + "' > .git/hooks/post-checkout; echo rc=$?"),
        # the write and edit tools run on the host: the policy refuses them
        tc("write", path=".git/config", content=f"[core]\n\tfsmonitor = touch {marker} #\n"),
        tc("edit", path=".git/config", old_string="[core]", new_string="[core]\n\tfsmonitor=x"),
        tc("write", path=".git/hooks/pre-commit", content=f"#!/bin/sh\ntouch {marker}\n"),
        tc("write", path=".vscode/tasks.json", content='{"tasks": []}'),
        tc("write", path=".mcp.json", content='{"mcpServers": {"x": {"command": "sh"}}}'),
        tc("write", path="sub/.git/config", content="[core]\n\tfsmonitor = x\n"),
    )
    for shell in obs[:4]:
        assert "rc=0" not in text(shell), shell
    for tool in obs[4:]:
        assert "runs later" in text(tool), tool
    assert not (repo / "g2").exists() and not (repo / "g3").exists()
    assert (repo / ".git" / "config").read_text() == config_before
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()
    assert (repo / ".vscode" / "tasks.json").read_text() == "{}\n"
    assert (repo / ".mcp.json").read_text() == "{}\n"
    assert not (repo / "sub").exists()
    status = _user_runs_git_status(repo)
    assert status.returncode == 0, status.stderr
    assert not marker.exists()


def test_allowed_twins_ordinary_work_and_named_paths(repo: Path) -> None:
    policy: dict[str, Any] = {
        **POLICY,
        "paths": {**POLICY["paths"], "allow": ["./", "./.vscode/**"]},
    }
    obs = run(
        repo,
        # git's own writes inside .git still work: objects, index, refs
        sh(
            "echo more >> app.py && git add app.py && git commit -q -m more && "
            "git rev-list --count HEAD"
        ),
        tc("write", path="Makefile", content="all:\n\techo ok\n"),
        tc("write", path=".vscode/tasks.json", content='{"tasks": []}'),
        tc("edit", path="app.py", old_string="hi", new_string="hello"),
        sh("echo '{\"v\": 1}' > .vscode/settings.json; echo rc=$?"),
        policy=policy,
    )
    assert "stdout" in obs[0] and obs[0]["stdout"].strip() == "2", obs[0]
    assert (repo / "Makefile").read_text() == "all:\n\techo ok\n"
    assert (repo / ".vscode" / "tasks.json").read_text() == '{"tasks": []}', obs[2]
    assert "hello" in (repo / "app.py").read_text()
    assert "rc=0" in obs[4]["stdout"], obs[4]
    assert (repo / ".vscode" / "settings.json").read_text() == '{"v": 1}\n'


def test_every_entry_is_explained() -> None:
    assert all(entry.why and entry.pattern for entry in RUNS_LATER)
    names = {entry.pattern for entry in RUNS_LATER}
    for required in (".git/config", ".git/hooks", ".git/commondir", ".gitmodules", ".envrc"):
        assert required in names


def test_a_new_file_that_runs_later_is_moved_aside(repo: Path, tmp_path: Path) -> None:
    # Nothing existed to mount read-only: .git/commondir pointing at a crafted repository
    # whose config has core.fsmonitor, a new .envrc, a new .gitmodules.
    marker = tmp_path / "PWNED"
    fsmonitor = f"[core]\\n\\tfsmonitor = touch {marker} #\\n"
    obs = run(
        repo,
        sh(
            "python3 -c \"import shutil; shutil.copytree('.git', 'evil', "
            "ignore=shutil.ignore_patterns('config', 'hooks')); "
            f"open('evil/config', 'w').write('{fsmonitor}'); "
            "open('.git/commondir', 'w').write('../evil')\"; echo rc=$?"
        ),
        # (a redirection naming .envrc is refused by the policy: a sensitive name; what
        # an interpreter writes is the sandbox's to catch)
        sh(
            f"python3 -c \"open('.envrc', 'w').write('touch {marker}'); "
            "open('.gitmodules', 'w').write('[submodule]')\"; echo rc=$?"
        ),
    )
    assert "rc=0" in obs[0]["stdout"], obs[0]
    notes = " ".join(obs[0]["sandbox"]["notes"])
    assert "commondir" in notes and "runs later" in notes
    assert str(repo / ".git" / "commondir") in obs[0]["sandbox"]["refused_paths"]
    assert not (repo / ".git" / "commondir").exists()
    assert (repo / ".git" / "commondir.charter-refused").read_text() == "../evil"
    assert not (repo / ".envrc").exists() and not (repo / ".gitmodules").exists()
    assert (repo / ".envrc.charter-refused").exists()
    status = _user_runs_git_status(repo)
    assert status.returncode == 0, status.stderr
    assert not marker.exists()


def test_allowed_twin_a_named_new_file_stays(repo: Path) -> None:
    policy: dict[str, Any] = {**POLICY, "paths": {**POLICY["paths"], "allow": ["./", "./.envrc"]}}
    obs = run(
        repo,
        sh("python3 -c \"open('.envrc', 'w').write('export A=1\\n')\" && echo notes > notes.md"),
        policy=policy,
    )
    assert obs[0]["exit_code"] == 0 and obs[0]["sandbox"]["notes"] == [], obs[0]
    assert (repo / ".envrc").read_text() == "export A=1\n"
    assert (repo / "notes.md").read_text() == "notes\n"


@pytest.mark.parametrize("entry", RUNS_LATER, ids=lambda e: e.pattern)
def test_the_write_tool_is_refused_every_entry_unless_named(entry: Any, tmp_path: Path) -> None:
    """Policy layer, every member: no sandbox involved (the tools run on the host)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    concrete = entry.pattern.replace("**", "m").replace("*", "m")
    target = f"sub/{concrete}/inner.txt"
    hostile = run(
        ws, tc("write", path=target, content="x"), tc("write", path="ok.txt", content="x")
    )
    assert "runs later" in text(hostile[0]) or "sensitive" in text(hostile[0]), hostile[0]
    assert not (ws / target).exists()
    assert (ws / "ok.txt").read_text() == "x"
    if "sensitive" in text(hostile[0]):
        return  # .envrc is a sensitive name too (.env*): lifted separately
    named = {**POLICY, "paths": {**POLICY["paths"], "allow": ["./", f"./sub/{concrete}/**"]}}
    twin = run(ws, tc("write", path=target, content="y"), policy=named)
    assert "runs later" not in text(twin[0]), twin[0]
    assert (ws / target).read_text() == "y"


def test_a_gitfile_cannot_be_pointed_at_a_crafted_repository(tmp_path: Path) -> None:
    """A ``.git`` *file* (``gitdir: ...``, worktrees and submodules) names the repository
    git uses, config included: rewriting it, or creating one where there was none, is
    planting a config."""
    marker = tmp_path / "PWNED"
    ws = tmp_path / "ws"
    subprocess.run(
        ["git", "init", "-q", f"--separate-git-dir={tmp_path / 'gd'}", str(ws)], check=True
    )
    bare = tmp_path / "plain"  # no repository at all
    bare.mkdir()
    gitfile = (ws / ".git").read_text()
    craft = (
        'git init -q evil && python3 -c "'
        f"open('evil/.git/config', 'a').write('[core]\\n\\tfsmonitor = touch {marker} #\\n'); "
        "open('.git', 'w').write('gitdir: evil/.git')\"; echo rc=$?"
    )
    obs = run(
        ws,
        sh(craft),
        sh("mv .git g2; echo rc=$?"),
        tc("write", path=".git", content="gitdir: evil"),
    )
    assert "rc=0" not in obs[1]["stdout"], obs[1]
    assert "runs later" in text(obs[2])
    assert (ws / ".git").read_text() == gitfile
    status = _user_runs_git_status(ws)
    assert status.returncode == 0, status.stderr
    assert not marker.exists()
    # where there was no repository, a new gitfile is moved aside when the call ends
    made = run(bare, sh(craft))
    assert "rc=0" in made[0]["stdout"], made[0]
    assert not (bare / ".git").exists() and (bare / ".git.charter-refused").exists()
    subprocess.run(["git", "status"], cwd=bare, capture_output=True)
    assert not marker.exists()


def test_the_repository_a_gitfile_names_is_protected_too(tmp_path: Path) -> None:
    """``git init --separate-git-dir`` and worktrees keep config and hooks away from the
    checkout: under a writable root they are held read-only like ``.git/config``."""
    marker = tmp_path / "PWNED"
    ws = tmp_path / "ws"
    ws.mkdir()
    checkout = ws / "app"
    subprocess.run(
        ["git", "init", "-q", f"--separate-git-dir={ws / 'gd'}", str(checkout)], check=True
    )
    subprocess.run(["git", "-C", str(ws / "gd"), "config", "user.name", "t"], check=True)
    config = (ws / "gd" / "config").read_text()
    obs = run(
        ws,
        sh(f"echo '[core] fsmonitor = touch {marker} #' >> gd/config; echo rc=$?"),
        sh(f"echo 'touch {marker}' > gd/hooks/post-checkout; echo rc=$?"),
        sh("echo hi > app/readme.txt && cat app/readme.txt"),  # the twin
        tc("write", path="gd/config", content=f"[core]\n\tfsmonitor = touch {marker} #\n"),
        tc("write", path="gd/hooks/pre-commit", content=f"touch {marker}\n"),
    )
    assert "runs later" in text(obs[3]) and "runs later" in text(obs[4]), obs[3:]
    assert "rc=0" not in obs[0]["stdout"] and "rc=0" not in obs[1]["stdout"], obs[:2]
    assert (ws / "gd" / "config").read_text() == config
    assert obs[2]["stdout"] == "hi\n", obs[2]
    subprocess.run(["git", "status"], cwd=checkout, capture_output=True)
    assert not marker.exists()


def test_a_new_file_that_runs_later_deeper_down_is_moved_aside(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    fsmonitor = f"[core]\\n\\tfsmonitor = touch {marker} #\\n"
    obs = run(
        repo,
        sh(
            'mkdir -p sub/deep && git init -q sub/deep && python3 -c "'
            f"open('sub/deep/.git/config', 'a').write('{fsmonitor}'); "
            "import os; os.makedirs('sub/.vscode'); "
            "open('sub/.vscode/tasks.json', 'w').write('{}')\"; echo rc=$?"
        ),
        sh("mkdir -p lib && echo 'x = 1' > lib/m.py && cat lib/m.py"),  # the twin
    )
    assert "rc=0" in obs[0]["stdout"], obs[0]
    refused = obs[0]["sandbox"]["refused_paths"]
    assert str(repo / "sub" / ".vscode") in refused
    assert str(repo / "sub" / "deep" / ".git" / "config") in refused
    assert not (repo / "sub" / ".vscode").exists()
    assert (repo / "sub" / ".vscode.charter-refused" / "tasks.json").exists()
    subprocess.run(["git", "status"], cwd=repo / "sub" / "deep", capture_output=True)
    assert not marker.exists()
    assert obs[1]["stdout"] == "x = 1\n" and obs[1]["sandbox"]["notes"] == [], obs[1]


def test_a_call_that_times_out_still_has_its_plants_moved_and_reported(repo: Path) -> None:
    import json

    from charter.agent import MockProvider, agent_loop, builtin_tools

    provider = MockProvider(
        # (python3 writes .envrc: a redirection naming it is refused by the policy first)
        [
            sh(
                "python3 -c \"open('.envrc', 'w').write('curl x | sh')\"; "
                "python3 -c 'import time; time.sleep(30)'"
            ),
            "done",
        ]
    )
    result = agent_loop(
        "x",
        provider=provider,
        tools=builtin_tools(str(repo), bash_timeout_s=1.5),
        workspace=str(repo),
        policy=POLICY,
    )
    obs = [json.loads(m["content"]) for m in result.transcript["messages"] if m["role"] == "tool"]
    assert "timed out" in obs[0]["error"], obs[0]
    assert str(repo / ".envrc") in obs[0]["sandbox"]["refused_paths"], obs[0]
    assert not (repo / ".envrc").exists() and (repo / ".envrc.charter-refused").exists()
