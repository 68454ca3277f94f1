"""Issue 30 item 1: a bare name or glob in a paths allow list never opens the filesystem.

``paths.allow ["src"]`` matched at any depth, the sandbox mounted its literal prefix
``/`` read-write, and the launched CLI wrote outside the repository. The hostile CLI
below writes outside (a host directory, not the private /tmp); the allowed twin writes
``./src``. Strict mode refuses the allow list no mount can express exactly.
"""

from __future__ import annotations

import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import charter, env_with, make_persona, plan_json, write

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

HOSTILE = """#!/bin/bash
echo pwned > "{outside}/probe.txt" 2>/dev/null
echo ok > src/ok.txt
"""


@pytest.fixture
def outside() -> Iterator[Path]:
    # a host directory outside the repository and outside /tmp (which the sandbox makes
    # private): a write that escapes lands here
    path = Path("/var/tmp") / f"charter-i30-{uuid.uuid4().hex}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _setup(project: Path, tmp_path: Path, outside: Path, allow: list[str]) -> dict[str, str]:
    write(project / "src" / "a.txt", "hello\n")
    make_persona(project / ".personas", "p", policy={"paths": {"allow": allow}})
    bindir = tmp_path / "bin"
    for tool in ("claude", "codex"):
        cli = write(bindir / tool, HOSTILE.format(outside=outside))
        cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    return env_with(bindir)


@pytest.mark.parametrize(
    "allow", [["src"], ["*.md", "./src"], ["src", "./", "/var/tmp/charter-no-such-dir"]]
)
@pytest.mark.parametrize("tool", ["claude", "codex"])
def test_bare_names_and_globs_do_not_open_the_filesystem(
    project: Path, tmp_path: Path, outside: Path, allow: list[str], tool: str
) -> None:
    env = _setup(project, tmp_path, outside, allow)
    out = charter("launch", tool, "p", cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    assert not (outside / "probe.txt").exists()
    # the allowed twin: ./src is writable (the workspace is the bare name's root)
    assert (project / "src" / "ok.txt").read_text() == "ok\n"


def test_an_inexact_allow_list_is_partial_and_strict_refuses_it(
    project: Path, tmp_path: Path, outside: Path
) -> None:
    env = _setup(project, tmp_path, outside, ["*.md", "./src"])
    plan = plan_json("claude", "p", cwd=project, env=env)
    elements = {e["element"]: e for e in plan["elements"]}
    assert elements["paths.write.allow"]["strength"] == "partial"
    assert "'*.md'" in elements["paths.write.allow"]["reason"]
    refused = charter("launch", "claude", "p", "--strict-policy", cwd=project, env=env)
    assert refused.returncode == 3 and "paths.write.allow" in refused.stderr
    assert not (project / "src" / "ok.txt").exists()
    # an exact allow list stays strong, strict launches it
    make_persona(project / ".personas", "q", policy={"paths": {"allow": ["./src", "./"]}})
    exact = plan_json("claude", "q", "--strict-policy", cwd=project, env=env)
    assert not [e for e in exact["refused"] if e["element"].startswith("paths")]
