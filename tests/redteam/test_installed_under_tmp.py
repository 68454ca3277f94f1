"""Class 12 of issue 29: the sandbox sees what it runs wherever charter is installed.

Without charter's helper (no C compiler) the proxy bridge and the unix-socket filter run
in charter's own Python inside the sandbox. A virtualenv under ``/tmp`` sat under the
sandbox's private ``/tmp``: ``bwrap: execvp .../.venv/bin/python: No such file or
directory``. The interpreter's prefix is now bound read-only into the sandbox.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.conftest import Server

from .conftest import POLICY, run, sh

pytestmark = pytest.mark.needs_sandbox


@pytest.fixture
def venv_under_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    from charter.sandbox import landlock

    venv = tmp_path / "venv"  # tmp_path is under /tmp: private inside the sandbox
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--copies", str(venv)], check=True
    )
    python = venv / "bin" / "python"
    assert str(python).startswith("/tmp/")
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setenv("CHARTER_LANDLOCK", "off")  # no helper: charter's Python runs inside
    landlock.build_helper(refresh=True)
    yield python
    monkeypatch.undo()
    landlock.build_helper(refresh=True)


def test_a_venv_under_tmp_runs_the_bridge_and_the_filter(
    tmp_path: Path, venv_under_tmp: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    server = Server()
    try:
        proxied = {
            **POLICY,
            "network": {"allow": ["127.0.0.1"]},
            "commands": {"allow": [*POLICY["commands"]["allow"], "curl:*"]},
        }
        obs = run(ws, sh(f"curl -s -m 5 http://127.0.0.1:{server.port}/venv"), policy=proxied)
        assert obs[0]["stdout"] == "hello from 127.0.0.1\n", obs[0]
        assert server.paths == ["/venv"]
        denied = run(ws, sh('python3 -c "import socket; socket.socket(socket.AF_UNIX)"'))
        assert denied[0]["exit_code"] != 0
        assert "Operation not permitted" in denied[0]["stderr"], denied[0]
        assert "No such file" not in denied[0]["stderr"]
        twin = run(ws, sh("echo ok"))
        assert twin[0]["stdout"] == "ok\n", twin[0]
    finally:
        server.close()


def test_binding_the_interpreter_does_not_unmask_what_is_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The virtualenv inside the workspace (both under /tmp): masks under it still hold."""
    from charter.sandbox import landlock

    ws = tmp_path / "ws"
    venv = ws / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--copies", str(venv)], check=True
    )
    (venv / "lib" / "server.pem").write_text("PRIVATE KEY\n")
    monkeypatch.setattr(sys, "executable", str(venv / "bin" / "python"))
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setenv("CHARTER_LANDLOCK", "off")
    landlock.build_helper(refresh=True)
    try:
        proxied = {**POLICY, "network": {"allow": ["127.0.0.1"]}}
        # (python3 reads it: ``cat`` naming a *.pem is refused by the policy first)
        read = "python3 -c \"print(open('.venv/lib/server.pem').read())\"; echo rc=$?"
        obs = run(ws, sh(read), policy=proxied)
        assert "PRIVATE KEY" not in obs[0]["stdout"], obs[0]
        assert "rc=" in obs[0]["stdout"]
    finally:
        monkeypatch.undo()
        landlock.build_helper(refresh=True)
