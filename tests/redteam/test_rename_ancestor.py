"""Class 2 of issue 29: renaming an ancestor must not un-deny what is under it.

Each directory between a writable root and a denied path (and the literal prefix of a
glob deny) is a mount point inside the sandbox, so ``mv`` of it fails (EBUSY) and the
next call still finds the denied path where its rule names it, for the shell and for the
host-side ``read`` tool alike. Write-denies hold the same way (rename, edit, rename back).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import POLICY, run, sh, tc, text

pytestmark = pytest.mark.needs_sandbox


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "config" / "secrets").mkdir(parents=True)
    (root / "config" / "secrets" / "key.txt").write_text("KEY=s3cr3t\n")
    (root / "config" / "locked").mkdir()
    (root / "config" / "locked" / "prod.toml").write_text("replicas = 3\n")
    (root / "vault" / "a").mkdir(parents=True)
    (root / "vault" / "a" / "key.txt").write_text("GLOBKEY=zz\n")
    (root / "config" / "app.toml").write_text("debug = false\n")
    return root


def _policy() -> dict[str, Any]:
    return {
        **POLICY,
        "paths": {
            "allow": ["./"],
            "deny": ["./config/secrets/**", "./vault/*/key.txt", "~/.ssh/**"],
            "write": {"deny": ["./config/locked/**"]},
        },
    }


def test_renaming_an_ancestor_does_not_undeny_reads(ws: Path) -> None:
    obs = run(
        ws,
        sh("mv config cfg2; echo rc=$?"),
        sh("cat cfg2/secrets/key.txt config/secrets/key.txt"),
        tc("read", path="cfg2/secrets/key.txt"),
        sh("python3 -c \"import os; os.rename('vault', 'v2'); os.rename('v2/a', 'v2/b')\""),
        sh("cat v2/b/key.txt vault/a/key.txt"),
        tc("read", path="v2/b/key.txt"),
        tc("grep", pattern="KEY", path="."),
        policy=_policy(),
    )
    assert "rc=0" not in text(obs[0])
    for shown in obs[1:]:
        assert "s3cr3t" not in text(shown) and "GLOBKEY" not in text(shown), shown
    assert (ws / "config" / "secrets" / "key.txt").exists()
    assert (ws / "vault" / "a" / "key.txt").exists()
    assert not (ws / "cfg2").exists() and not (ws / "v2").exists()


def test_renaming_an_ancestor_does_not_undeny_writes(ws: Path) -> None:
    obs = run(
        ws,
        sh("mv config/locked config/l2; mv config c2; echo rc=$?"),
        sh("echo 'replicas = 0' > c2/locked/prod.toml; echo 'replicas = 0' > config/l2/prod.toml"),
        tc("write", path="config/locked/prod.toml", content="replicas = 0\n"),
        sh("mv c2 config; mv config/l2 config/locked"),
        policy=_policy(),
    )
    assert "rc=0" not in text(obs[0])
    assert "denied" in text(obs[2])
    # the renames failed: what the tools wrote under the new names are new files
    assert not (ws / "c2").exists() and (ws / "config" / "locked").is_dir()
    assert (ws / "config" / "locked" / "prod.toml").read_text() == "replicas = 3\n"


def test_allowed_twin_renames_elsewhere_still_work(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "m.py").write_text("x = 1\n")
    obs = run(
        ws,
        sh("mv src/pkg src/pkg2 && mv src lib && cat lib/pkg2/m.py"),
        sh(
            "echo 'debug = true' > config/app.toml && mkdir -p config/new && "
            "mv config/app.toml config/new/"
        ),
        tc("read", path="config/new/app.toml"),
        policy=_policy(),
    )
    assert obs[0]["stdout"] == "x = 1\n", obs[0]
    assert obs[1]["exit_code"] == 0, obs[1]
    assert obs[2] == "debug = true"
