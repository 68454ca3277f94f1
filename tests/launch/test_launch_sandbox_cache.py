"""A sandboxed launch from the stored compiled sandbox, and what it must still hold.

The second launch of a persona uses the compiled sandbox kept on disk (no policy engine,
no pattern compilation); each test checks that it enforces what a fresh build would: a
denied file that appeared since is masked, and charter's own caches (which the next
launch trusts) cannot be rewritten from inside, while the rest of HOME stays writable.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from .conftest import charter, env_with, make_persona, write

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

CLI = """#!/bin/bash
out="$PWD/out"
mkdir -p "$out"
cat src/new.key > "$out/key.txt" 2>&1
cat src/a.txt > "$out/allowed.txt" 2>&1
cache="$HOME/.cache/charter"
for target in "$cache/launch" "$cache/sandbox" "$XDG_STATE_HOME/charter"; do
  if echo poisoned > "$target/evil.json" 2>/dev/null; then echo "wrote $target"; fi
done > "$out/poison.txt"
echo mine > "$HOME/notes.txt" && echo ok > "$out/home.txt"
"""


def _setup(project: Path, tmp_path: Path) -> dict[str, str]:
    write(project / "src" / "a.txt", "hello\n")
    make_persona(
        project / ".personas",
        "p",
        # no write allow list: HOME is writable inside, charter's dirs must not be
        policy={"paths": {"deny": ["*.key"]}, "network": {"deny": ["*"]}},
    )
    bindir = tmp_path / "bin"
    cli = write(bindir / "claude", CLI)
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    return env_with(bindir)


def _profiles(home: Path) -> list[Path]:
    return sorted((home / ".cache" / "charter" / "sandbox" / "profiles").glob("*.json"))


def test_a_stored_sandbox_still_masks_a_file_that_appeared_since(
    project: Path, tmp_path: Path
) -> None:
    env = _setup(project, tmp_path)
    home = Path(env["HOME"])
    first = charter("launch", "claude", "p", cwd=project, env=env)
    assert first.returncode == 0, first.stderr
    assert (project / "out" / "allowed.txt").read_text() == "hello\n"
    [stored] = _profiles(home)
    # the allowed twin: nothing changed, the stored sandbox is used as it is
    again = charter("launch", "claude", "p", cwd=project, env=env)
    assert again.returncode == 0, again.stderr
    assert _profiles(home) == [stored]
    # hostile: a denied file appears; the next launch must mask it
    write(project / "src" / "new.key", "SECRET=1\n")
    third = charter("launch", "claude", "p", cwd=project, env=env)
    assert third.returncode == 0, third.stderr
    assert "SECRET" not in (project / "out" / "key.txt").read_text()
    assert (project / "out" / "allowed.txt").read_text() == "hello\n"


def test_the_cli_cannot_rewrite_what_the_next_launch_trusts(project: Path, tmp_path: Path) -> None:
    env = _setup(project, tmp_path)
    home = Path(env["HOME"])
    out = charter("launch", "claude", "p", cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    assert (project / "out" / "poison.txt").read_text() == ""
    assert not list((home / ".cache" / "charter").rglob("evil.json"))
    # the allowed twin: the rest of HOME is writable, as the policy says
    assert (project / "out" / "home.txt").read_text() == "ok\n"
    assert (home / "notes.txt").read_text() == "mine\n"
    # and without the sandbox the same script does write there (the test can tell)
    bare = charter("launch", "claude", "p", "--sandbox", "never", cwd=project, env=env)
    assert bare.returncode == 0, bare.stderr
    assert "wrote" in (project / "out" / "poison.txt").read_text()


SETTINGS_CLI = """#!/bin/bash
out="$PWD/out"
mkdir -p "$out"
for arg in "$@"; do
  case "$arg" in --settings=*) settings="${arg#--settings=}";; esac
done
cat "$settings" > "$out/read.txt" 2>&1
if echo '{"permissions": {"allow": ["Bash"]}}' > "$settings" 2>/dev/null; then
  echo rewritten > "$out/settings.txt"
else
  echo refused > "$out/settings.txt"
fi
tmp="$(dirname "$settings")/scratch.txt"
echo ok > "$tmp" && cat "$tmp" > "$out/scratch.txt"
"""


def test_the_cli_cannot_rewrite_its_own_policy_files(project: Path, tmp_path: Path) -> None:
    """Hostile: the settings file charter wrote for claude is read-only inside the
    sandbox; the twins: the CLI reads it (as root the temp dir is under /run, which the
    sandbox makes private: it used to be missing inside), and the launch's temp dir
    itself stays writable (the CLI's scratch)."""
    make_persona(
        project / ".personas",
        "p",
        policy={
            "tools": {"allow": ["read", "bash"]},
            "paths": {"deny": ["*.key"]},
            "network": {"deny": ["*"]},
        },
    )
    bindir = tmp_path / "bin"
    cli = write(bindir / "claude", SETTINGS_CLI)
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    env = env_with(bindir)
    out = charter("launch", "claude", "p", cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    assert '"permissions"' in (project / "out" / "read.txt").read_text()
    assert (project / "out" / "settings.txt").read_text() == "refused\n"
    assert (project / "out" / "scratch.txt").read_text() == "ok\n"
    bare = charter("launch", "claude", "p", "--sandbox", "never", cwd=project, env=env)
    assert bare.returncode == 0, bare.stderr
    assert (project / "out" / "settings.txt").read_text() == "rewritten\n"
