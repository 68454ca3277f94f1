"""``charter launch`` inside charter.sandbox (issue 11 section 1), with a hostile CLI.

The "CLI" is a script that does what a talked-around agent would: read the persona's
denied secrets, write outside the workspace, reach a loopback server with the network
denied. Each effect is checked on the file, the outside path and the server's socket;
the allowed twin (a file the policy allows) must still work.
"""

from __future__ import annotations

import json
import shutil
import socket
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import charter, env_with, make_persona, plan_json, write

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

HOSTILE = """#!/bin/bash
out="$PWD/out"
mkdir -p "$out"
cat secrets/token.txt > "$out/secret.txt" 2>&1
cat src/a.txt > "$out/allowed.txt" 2>&1
echo pwned > "{outside}" 2>"$out/outside.err"
echo made > "$out/inside.txt"
python3 - <<'PY' > "$out/net.txt" 2>&1
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).sendall(b"hello")
    print("connected")
except OSError as exc:
    print("refused", exc)
PY
"""


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            got.append(conn.recv(100) or b"(connected)")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], got
    finally:
        stop.set()
        thread.join(timeout=2)
        server.close()


def setup(project: Path, tmp_path: Path, port: int) -> tuple[dict[str, str], Path]:
    write(project / "secrets" / "token.txt", "TOKEN=hunter2\n")
    write(project / "src" / "a.txt", "hello\n")
    outside = tmp_path / "outside.txt"
    make_persona(
        project / ".personas",
        "p",
        policy={
            "paths": {"allow": ["./"], "deny": ["./secrets/**"]},
            "network": {"deny": ["*"]},
        },
    )
    bindir = tmp_path / "bin"
    cli = write(bindir / "claude", HOSTILE.format(outside=outside, port=port))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    return env_with(bindir), outside


def test_the_sandbox_holds_what_the_cli_cannot(
    project: Path, tmp_path: Path, listener: tuple[int, list[bytes]]
) -> None:
    port, got = listener
    env, outside = setup(project, tmp_path, port)
    plan = plan_json("claude", "p", cwd=project, env=env)
    assert plan["sandbox"]["mode"] == "auto" and plan["sandbox"]["wrapped"] is True
    elements = {e["element"]: e for e in plan["elements"]}
    assert elements["network.deny"]["strength"] == "strong"
    assert elements["network.deny"]["enforced_by"] in ("sandbox", "both")

    out = charter("launch", "claude", "p", cwd=project, env=env)
    assert out.returncode == 0, out.stderr
    results = project / "out"
    assert "hunter2" not in (results / "secret.txt").read_text()
    assert not outside.exists()
    assert (results / "net.txt").read_text().startswith("refused")
    assert got == []
    # the allowed twin: the workspace is readable and writable as the policy says
    assert (results / "allowed.txt").read_text() == "hello\n"
    assert (results / "inside.txt").read_text() == "made\n"


def test_never_leaves_the_gap_and_strict_refuses_it(
    project: Path, tmp_path: Path, listener: tuple[int, list[bytes]]
) -> None:
    port, got = listener
    env, outside = setup(project, tmp_path, port)
    refused = charter(
        "launch", "claude", "p", "--sandbox", "never", "--strict-policy", cwd=project, env=env
    )
    assert refused.returncode == 3 and "network.deny" in refused.stderr
    assert not (project / "out").exists()
    # with the sandbox, --strict-policy has nothing left to refuse on paths and network
    strict = plan_json("claude", "p", "--strict-policy", cwd=project, env=env)
    assert not [e for e in strict["refused"] if e["element"].startswith(("paths", "network"))]
    # never, unstrict: runs as before, and the hostile script reaches what it reaches
    ran = charter("launch", "claude", "p", "--sandbox", "never", cwd=project, env=env)
    assert ran.returncode == 0, ran.stderr
    assert "hunter2" in (project / "out" / "secret.txt").read_text()  # the gap, shown
    assert outside.exists()
    assert (project / "out" / "net.txt").read_text().startswith("connected")
    for _ in range(50):  # the listener thread records the connection
        if got:
            break
        threading.Event().wait(0.05)
    assert got == [b"hello"]


def test_bad_sandbox_mode_is_bad_input(project: Path, tmp_path: Path) -> None:
    env, _ = setup(project, tmp_path, 9)
    out = charter("print-policy", "claude", "p", cwd=project,
                  env={**env, "CHARTER_LAUNCH_SANDBOX": "sometimes"})  # fmt: skip
    assert out.returncode == 2 and "CHARTER_LAUNCH_SANDBOX" in out.stderr
    assert "Traceback" not in out.stderr


def test_persona_json_sets_the_mode(project: Path, tmp_path: Path) -> None:
    """Per persona (persona.json "sandbox"); --sandbox and the environment override it."""
    env, _ = setup(project, tmp_path, 9)
    pj = project / ".personas" / "p" / "persona.json"
    data = json.loads(pj.read_text())
    pj.write_text(json.dumps({**data, "sandbox": "never"}))
    plan = plan_json("claude", "p", cwd=project, env=env)
    assert plan["sandbox"] == {"mode": "never", "wrapped": False, "reasons": []}
    forced = plan_json("claude", "p", "--sandbox", "auto", cwd=project, env=env)
    assert forced["sandbox"]["wrapped"] is True
    pj.write_text(json.dumps({**data, "sandbox": "sometimes"}))
    out = charter("print-policy", "claude", "p", cwd=project, env=env)
    assert out.returncode != 0 and "expected one of auto, always, never" in out.stdout + out.stderr


def test_the_users_environment_is_on_no_command_line(project: Path, tmp_path: Path) -> None:
    """Issue 29 class 10: bubblewrap got the launched CLI's environment (API keys
    included) as ``--setenv`` arguments, readable in ``/proc/<pid>/cmdline`` by any local
    user while the CLI ran; now it reads it from a descriptor."""
    import hashlib
    import os

    secret = "sk-ant-api03-" + "z" * 30
    make_persona(project / ".personas", "p", policy={"paths": {"allow": ["./"]}})
    bindir = tmp_path / "bin"
    script = (
        "#!/bin/bash\nsleep 1.5\n"
        'printf %s "$ANTHROPIC_API_KEY" | sha256sum | cut -d" " -f1 > "$PWD/key.sha"\n'
    )
    cli = write(bindir / "claude", script)
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    seen: list[bytes] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        line = fh.read()
                except OSError:
                    continue
                if secret.encode() in line:
                    seen.append(line)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = charter(
            "launch", "claude", "p", cwd=project, env=env_with(bindir, ANTHROPIC_API_KEY=secret)
        )
    finally:
        stop.set()
        watcher.join()
    assert out.returncode == 0, out.stderr
    # the twin: the CLI inside had the key
    assert (project / "key.sha").read_text().strip() == hashlib.sha256(secret.encode()).hexdigest()
    assert seen == []
