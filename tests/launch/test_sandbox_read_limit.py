"""Issue 30 item 2: ``paths.allow`` limits reads wherever the repository lives.

With the repository under /tmp, the sandbox's private /tmp got a Landlock read rule that
covered the whole workspace, so a CLI read ``secrets/x.txt`` outside ``./public`` (under
/var/tmp the same read was refused). The hostile CLI reads outside the allowed root; the
allowed twin reads and writes inside it and writes its temp dir.
"""

from __future__ import annotations

import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import charter, env_with, make_persona, write

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

READER = """#!/bin/bash
out="$PWD/public/out"
{ cat secrets/x.txt 2>&1 || echo refused; } > "$out.secret"
t="${TMPDIR:-/tmp}/t.txt"
{ cat public/y.txt && echo t > "$t" && cat "$t"; } > "$out.twin" 2>&1
"""


@pytest.fixture(params=["tmp", "var-tmp"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    if request.param == "tmp":
        root = tmp_path / "repo"
    else:
        root = Path("/var/tmp") / f"charter-i30-{uuid.uuid4().hex}" / "repo"
    (root / ".git").mkdir(parents=True)
    (root / ".personas").mkdir()
    try:
        yield root
    finally:
        if request.param != "tmp":
            shutil.rmtree(root.parent, ignore_errors=True)


def test_reads_outside_the_allowed_root_are_refused(repo: Path, tmp_path: Path) -> None:
    write(repo / "secrets" / "x.txt", "TOPSECRET\n")
    write(repo / "public" / "y.txt", "PUBLIC\n")
    make_persona(repo / ".personas", "p", policy={"paths": {"allow": ["./public"]}})
    # not tmp_path/bin: the install prefix of a PATH entry (its parent) is readable
    bindir = tmp_path / "tools" / "bin"
    cli = write(bindir / "claude", READER)
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    out = charter("launch", "claude", "p", "--strict-policy", cwd=repo, env=env_with(bindir))
    assert out.returncode == 0, out.stderr
    secret = (repo / "public" / "out.secret").read_text()
    assert "TOPSECRET" not in secret and "refused" in secret
    assert (repo / "public" / "out.twin").read_text() == "PUBLIC\nt\n"


def test_without_landlock_a_read_limit_is_refused(project: Path, tmp_path: Path) -> None:
    """Only Landlock limits reads: without it the launch refuses (fail closed)."""
    write(project / "secrets" / "x.txt", "TOPSECRET\n")
    make_persona(project / ".personas", "p", policy={"paths": {"allow": ["./public"]}})
    bindir = tmp_path / "tools" / "bin"
    cli = write(bindir / "claude", '#!/bin/bash\ncat secrets/x.txt > "$PWD/leak.txt"\n')
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    env = env_with(bindir, CHARTER_LANDLOCK="off")
    out = charter("launch", "claude", "p", cwd=project, env=env)
    assert out.returncode == 1 and "needs Landlock" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (project / "leak.txt").exists()
