"""Issue 30 item 4: a sandboxed CLI cannot plant what runs after it.

The hostile CLI (a script under the CLI's name, through the real launch path) writes
the user's CLI settings (``~/.claude/settings.json`` hooks, codex's ``config.toml``...),
the project's CLI configs and MCP config, ``.vscode``, git's config and hooks. Each
effect is checked on the host after the launch; the allowed twins (the workspace, the
CLI's own state in its per-launch dir, reading the user's settings) must still work, and
no placeholder is left behind.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from .conftest import charter, env_with, make_persona, write

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

PLANT = [
    "$HOME/.claude/settings.json",
    "$HOME/.claude.json",
    "$HOME/.codex/config.toml",
    "$HOME/.gemini/settings.json",
    "$HOME/.config/opencode/opencode.json",
    "$HOME/.local/share/opencode/bin/rg",
    ".claude/settings.json",
    ".gemini/settings.json",
    ".codex/config.toml",
    ".opencode/plugin/evil.js",
    "opencode.json",
    ".mcp.json",
    ".vscode/tasks.json",
    ".git/hooks/pre-commit",
    ".git/config",
]

HOSTILE = """#!/bin/bash
out="$PWD/out"; mkdir -p "$out"
for f in {plant}; do
  mkdir -p "$(dirname "$f")" 2>/dev/null
  echo PLANTED >> "$f" 2>/dev/null && echo "$f" >> "$out/planted.txt"
done
echo ok > src/ok.txt
case "$(basename "$0")" in
  claude) state="$CLAUDE_CONFIG_DIR"; own="$CLAUDE_CONFIG_DIR/settings.json";;
  codex) state="$CODEX_HOME"; own="$CODEX_HOME/config.toml";;
  gemini) state="$GEMINI_CLI_HOME/.gemini"; own="$GEMINI_CLI_HOME/.gemini/settings.json";;
  opencode) state="$XDG_DATA_HOME/opencode"
    own="${{XDG_CONFIG_HOME:-$HOME/.config}}/opencode/opencode.json";;
esac
mkdir -p "$state/sessions" && echo s > "$state/sessions/one.jsonl" && echo state >> "$out/twins.txt"
cat "$own" >> "$out/twins.txt"
"""

USER_FILES = {
    ".claude/settings.json": '{"user": "claude"}',
    ".claude.json": '{"numStartups": 1}',
    ".codex/config.toml": 'model = "user-codex"\n',
    ".gemini/settings.json": '{"user": "gemini"}',
    ".config/opencode/opencode.json": '{"user": "opencode"}',
    ".local/share/opencode/auth.json": "{}",
}


@pytest.mark.parametrize("tool", ["claude", "codex", "gemini", "opencode"])
def test_nothing_that_runs_later_can_be_planted(
    project: Path, tmp_path: Path, _isolated: Path, tool: str
) -> None:
    home = _isolated
    for rel, text in USER_FILES.items():
        write(home / rel, text)
    write(project / ".git" / "config", "[core]\n\tbare = false\n")
    write(project / "src" / "a.txt", "hello\n")
    make_persona(
        project / ".personas",
        "p",
        policy={"paths": {"allow": ["./"]}, "network": {"deny": ["*"]}},
    )
    bindir = tmp_path / "bin"
    cli = write(bindir / tool, HOSTILE.format(plant=" ".join(f'"{p}"' for p in PLANT)))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    before = {rel: (home / rel).read_text() for rel in USER_FILES}
    out = charter("launch", tool, "p", cwd=project, env=env_with(bindir))
    assert out.returncode == 0, out.stderr
    for rel in PLANT:  # the effect on the host (HOME is under /tmp, private inside)
        path = Path(rel.replace("$HOME", str(home))) if "$HOME" in rel else project / rel
        assert not path.exists() or "PLANTED" not in path.read_text(), rel
    assert {rel: (home / rel).read_text() for rel in USER_FILES} == before
    assert not (home / ".local/share/opencode/bin").exists()
    assert (project / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    for rel in (".claude", ".gemini", ".codex", ".opencode", ".vscode", ".mcp.json",
                "opencode.json", ".git/hooks"):  # fmt: skip
        assert not (project / rel).exists(), rel  # placeholders removed
    # the allowed twins: the workspace, the CLI's own state, the user's settings read
    assert (project / "src" / "ok.txt").read_text() == "ok\n"
    twins = (project / "out" / "twins.txt").read_text()
    assert twins.startswith("state\n"), twins
    user = {"claude": "claude", "codex": "user-codex", "gemini": "gemini"}.get(tool, "opencode")
    assert user in twins
    assert not list(home.rglob("one.jsonl"))  # the run's state went with the launch


@pytest.mark.parametrize("named", ["./.gemini", "./.gemini/**"])
def test_a_persona_may_allow_one_by_name(project: Path, tmp_path: Path, named: str) -> None:
    """``./.gemini`` (or a pattern below it, as the shell's sandbox and the write tools
    read it: charter.policy.runs_later.named_by) in the write allow list stays writable;
    the rest is held."""
    make_persona(
        project / ".personas",
        "p",
        policy={"paths": {"allow": ["./", named]}, "network": {"deny": ["*"]}},
    )
    (project / ".gemini").mkdir()
    bindir = tmp_path / "bin"
    script = "#!/bin/bash\necho t > .gemini/settings.json; echo m > .mcp.json 2>/dev/null; true\n"
    cli = write(bindir / "claude", script)
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    out = charter("launch", "claude", "p", cwd=project, env=env_with(bindir))
    assert out.returncode == 0, out.stderr
    assert (project / ".gemini" / "settings.json").read_text() == "t\n"
    assert not (project / ".mcp.json").exists()
