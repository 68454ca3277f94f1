"""Issue 30 item 7: crashes and compatibility.

A launch from a deeply nested directory (a long ``TMPDIR``) crashed binding the proxy's
unix socket; agent-persona's include form ``[{"file": ...}]`` was refused; gemini
settings with comments were corrupted by a regex comment stripper.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from .conftest import charter, env_with, make_persona, plan_json, write


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
def test_a_deeply_nested_directory_and_long_tmpdir_launch(project: Path, tmp_path: Path) -> None:
    deep = project
    for _ in range(4):
        deep = deep / ("d" * 60)
    deep.mkdir(parents=True)
    make_persona(project / ".personas", "p", policy={"network": {"deny": ["*"]}})
    bindir = tmp_path / "tools" / "bin"
    cli = write(bindir / "claude", '#!/bin/bash\necho ran > "$PWD/ran.txt"\n')
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    env = env_with(bindir, TMPDIR=str(deep))
    out = charter("launch", "claude", "p", "--sandbox", "always", cwd=deep, env=env)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert (deep / "ran.txt").read_text() == "ran\n"


def test_an_unforeseen_launch_failure_is_one_line_and_exit_2(project: Path, tmp_path: Path) -> None:
    """A sandbox whose bubblewrap cannot be run fails in one line (exit 2), no traceback."""
    make_persona(project / ".personas", "p", policy={"network": {"deny": ["*"]}})
    bindir = tmp_path / "tools" / "bin"
    cli = write(bindir / "claude", "#!/bin/bash\necho ran\n")
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    bad = write(tmp_path / "tools" / "badwrap", "not a program\n")
    bad.chmod(0o755)  # executable, but no interpreter line: exec fails (ENOEXEC)
    env = env_with(bindir, CHARTER_BWRAP=str(bad), CHARTER_LAUNCH_CACHE="0")
    out = charter("launch", "claude", "p", "--sandbox", "always", cwd=project, env=env)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode in (1, 2) and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_agent_persona_include_entries(project: Path) -> None:
    base = {"policy": {"network": {"deny": ["*"]}}}
    write(project / ".personas" / ".shared" / "policy-base.json", json.dumps(base))
    make_persona(project / ".personas", "p")
    write(
        project / ".personas" / "p" / "persona.json",
        json.dumps(
            {"include": [{"file": "policy-base.json"}], "policy": {"tools": {"deny": ["bash"]}}}
        ),
    )
    plan = plan_json("claude", "p", cwd=project)
    assert plan["policy"]["network"]["deny"] == ["*"]
    assert plan["policy"]["tools"]["deny"] == ["bash"]
    write(
        project / ".personas" / "p" / "persona.json",
        json.dumps({"include": [{"persona": "other"}]}),
    )
    out = charter("print-policy", "claude", "p", cwd=project)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert '{"persona": NAME}' in out.stderr + out.stdout
    assert "include[0]" in out.stderr + out.stdout


def test_gemini_settings_with_comments_keep_their_strings(project: Path, _isolated: Path) -> None:
    settings = """{
  // the user's own
  "context": {"fileFiltering": {"ignore": ["build/*", "**/*.log"]}}, /* keep */
  "url": "http://example.com//x"
}
"""
    write(_isolated / ".gemini" / "settings.json", settings)
    make_persona(
        project / ".personas",
        "p",
        mcp={"alpha": {"command": "python3", "args": ["-c", "pass"]}},
    )
    env = env_with(None, CHARTER_GEMINI_MCP="home")
    plan = plan_json("gemini", "p", cwd=project, env=env)
    merged = next(json.loads(t) for p, t in plan["files"].items() if p.endswith("settings.json"))
    assert merged["context"]["fileFiltering"]["ignore"] == ["build/*", "**/*.log"]
    assert merged["url"] == "http://example.com//x"
    assert "alpha" in merged["mcpServers"]
