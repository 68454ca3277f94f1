"""Landlock by itself: the helper run directly, without bubblewrap, so nothing else can
be what stops the hostile case. Each hostile case has an allowed twin that works.

Also: the helper inside the real sandbox (rules derived from the profile), its proxy
bridge, and what happens without a compiler (bubblewrap alone, said in the receipt).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from charter.agent.builtins import builtin_tools
from charter.policy import Policy, with_execution_policy
from charter.sandbox import NetworkMode, available, build_profile, landlock_abi
from charter.sandbox.landlock import SYSTEM_READ_ROOTS, build_helper, landlock_args

ABI = landlock_abi()

needs_landlock = pytest.mark.skipif(ABI is None, reason="no Landlock in this kernel")


@pytest.fixture(scope="module")
def helper() -> str:
    built = build_helper()
    if built.path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Landlock helper must build under CI=true: {built.reason}")
        pytest.skip(f"no Landlock helper: {built.reason}")
    return built.path


def system_reads() -> list[str]:
    """What a Python child needs to start: the system roots and this interpreter's prefix."""
    roots = [r for r in SYSTEM_READ_ROOTS if os.path.exists(r) and r not in ("/proc", "/sys")]
    roots += [os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), "/proc", "/dev"]
    out: list[str] = []
    for root in roots:
        out += ["-r", root]
    return out


# The child reports the errno of one operation: 0 when it succeeded.
PROBE = """
import errno, os, socket, sys
op, target = sys.argv[1], sys.argv[2]
try:
    if op == "write":
        with open(target, "w") as f:
            f.write("x")
    elif op == "read":
        open(target).read()
    elif op == "list":
        os.listdir(target)
    elif op == "connect":
        socket.create_connection(("127.0.0.1", int(target)), timeout=5).close()
    elif op == "bind":
        s = socket.socket()
        s.bind(("127.0.0.1", int(target)))
    print(0)
except OSError as exc:
    print(exc.errno)
"""


def probe(helper: str, flags: list[str], op: str, target: str) -> int:
    run = subprocess.run(
        [helper, *flags, "--", sys.executable, "-I", "-S", "-c", PROBE, op, target],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return int(run.stdout.strip())


@pytest.fixture
def listener() -> Iterator[int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join()
    srv.close()


@needs_landlock
def test_write_outside_the_writable_roots_is_refused(helper: str, tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    flags = [*system_reads(), "-r", str(tmp_path), "-w", str(allowed)]
    assert probe(helper, flags, "write", str(outside / "f")) == errno.EACCES
    assert not (outside / "f").exists()
    assert probe(helper, flags, "write", str(allowed / "f")) == 0
    assert (allowed / "f").read_text() == "x"


@needs_landlock
def test_read_of_a_root_not_granted_is_refused(helper: str, tmp_path: Path) -> None:
    granted, other = tmp_path / "granted", tmp_path / "other"
    for d in (granted, other):
        d.mkdir()
        (d / "file.txt").write_text("content")
    flags = [*system_reads(), "-r", str(granted)]
    assert probe(helper, flags, "read", str(other / "file.txt")) == errno.EACCES
    assert probe(helper, flags, "list", str(other)) == errno.EACCES
    assert probe(helper, flags, "read", str(granted / "file.txt")) == 0
    assert probe(helper, flags, "list", str(granted)) == 0


@needs_landlock
def test_read_only_root_is_not_writable(helper: str, tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("keep")
    flags = [*system_reads(), "-r", str(tmp_path)]
    assert probe(helper, flags, "write", str(tmp_path / "file.txt")) == errno.EACCES
    assert (tmp_path / "file.txt").read_text() == "keep"
    assert probe(helper, [*flags, "-w", str(tmp_path)], "write", str(tmp_path / "file.txt")) == 0


@pytest.mark.skipif(ABI is None or ABI < 4, reason="TCP rules need Landlock ABI 4")
def test_connect_and_bind_refused_when_the_network_is_denied(helper: str, listener: int) -> None:
    assert probe(helper, ["-n"], "connect", str(listener)) == errno.EACCES
    assert probe(helper, ["-n"], "bind", "0") == errno.EACCES
    # Twins: without -n, and with -n but this port allowed (the proxy bridge's rule).
    assert probe(helper, [], "connect", str(listener)) == 0
    assert probe(helper, ["-n", "-c", str(listener)], "connect", str(listener)) == 0


def test_the_helper_refuses_bad_arguments(helper: str) -> None:
    for argv in (["-x", "--", "true"], ["-r"], ["-c", "80", "--", "true"], ["-b", "99999:/s"]):
        run = subprocess.run([helper, *argv], capture_output=True, text=True, check=False)
        assert run.returncode == 125, argv
        assert "landlock_exec" in run.stderr
    ok = subprocess.run([helper, "--", "true"], check=False)
    assert ok.returncode == 0


def test_bridge_relays_to_the_unix_socket_and_dies_with_the_command(
    helper: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "up.sock")
    upstream = socket.socket(socket.AF_UNIX)
    upstream.bind(path)
    upstream.listen(4)
    got: list[bytes] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = upstream.accept()
            data = b""
            while chunk := conn.recv(1024):
                data += chunk
            got.append(data)
            conn.sendall(b"echo:" + data)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = (
        "import socket\n"
        "for i in range(2):\n"
        "    c = socket.create_connection(('127.0.0.1', 3130))\n"
        "    c.sendall(b'hi%d' % i); c.shutdown(socket.SHUT_WR)\n"
        "    print(c.recv(100).decode())\n"
    )
    flags = ["-b", f"3130:{path}"]
    if ABI is not None and ABI >= 4:
        flags += ["-n", "-c", "3130"]  # the command reaches the bridge and nothing else
    run = subprocess.run(
        [helper, *flags, "--", sys.executable, "-I", "-S", "-c", client],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    thread.join(timeout=5)
    upstream.close()
    assert run.stdout.split() == ["echo:hi0", "echo:hi1"], run.stderr
    assert got == [b"hi0", b"hi1"]
    # The relay died with the command: the port is free again.
    probe_sock = socket.socket()
    probe_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for _ in range(50):
        try:
            probe_sock.bind(("127.0.0.1", 3130))
            break
        except OSError:
            threading.Event().wait(0.05)
    else:
        pytest.fail("the bridge outlived its command")
    probe_sock.close()


def test_rules_follow_the_profile(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = Policy.from_dict({"paths": {"allow": ["./**"]}, "network": {"deny": ["*"]}})
    profile = build_profile(policy, str(ws), home=str(tmp_path))
    assert profile.readable == (str(ws.resolve()),)
    assert profile.network is NetworkMode.NONE
    # (The workspace is under /tmp here, so the sandbox's private dir is /run.)
    args = landlock_args(profile, 7, env={"PATH": "/usr/bin"}, private_dirs=["/run"])
    reads = [args[i + 1] for i, a in enumerate(args) if a == "-r"]
    writes = [args[i + 1] for i, a in enumerate(args) if a == "-w"]
    assert str(ws.resolve()) in reads and "/usr" in reads and "/" not in reads
    assert sorted(writes) == sorted(["/dev", "/run", str(ws.resolve())])
    assert args[-2:] == ["-n", "-u"]
    assert "-n" not in landlock_args(profile, 3, env={}, private_dirs=[])  # no TCP rules < 4
    proxied = build_profile(
        Policy.from_dict({"network": {"allow": ["example.com"]}}), str(ws), home=str(tmp_path)
    )
    # Reads and writes unrestricted: no file rules at all, TCP only to the bridge port.
    assert landlock_args(proxied, 7, env={}) == ["-n", "-c", "3128", "-u"]


# ---- inside the real sandbox, through the built-in bash tool ----

POLICY = {
    "commands": {"allow": ["python3:*", "cat:*", "ls:*", "echo:*"]},
    "paths": {"allow": ["./**"]},
    "network": {"deny": ["*"]},
}


def run_bash(
    workspace: Path, command: str, policy: dict[str, object] = POLICY
) -> dict[str, object]:
    tool = next(t for t in builtin_tools(str(workspace)) if t.name == "bash")

    async def go() -> dict[str, object]:
        with with_execution_policy(policy, label="persona"):
            return await tool.handler(command=command)  # type: ignore[no-any-return]

    return asyncio.run(go())


@pytest.mark.needs_sandbox
@needs_landlock
def test_bash_tool_cannot_read_outside_the_read_allow_list(helper: str, tmp_path: Path) -> None:
    # Not denied by name, not under a mask: only the read allow-list says no, and only
    # Landlock enforces it inside the shell (the text names no path the policy could see).
    ws, other = tmp_path / "ws", Path.home() / f".charter-ll-{os.getpid()}"
    ws.mkdir()
    other.mkdir(exist_ok=True)
    try:
        (other / "project.txt").write_text("OTHER PROJECT\n")
        (ws / "mine.txt").write_text("mine\n")
        code = f"import pathlib; print(pathlib.Path('{other}/project.txt').read_text())"
        hostile = run_bash(ws, f'python3 -c "{code}"')
        assert "OTHER PROJECT" not in str(hostile["stdout"])
        receipt = hostile["sandbox"]
        assert isinstance(receipt, dict) and "reads" in receipt["landlock"]
        assert f"{other}/project.txt" in receipt["refused_paths"]
        twin = run_bash(ws, "python3 -c \"print(open('mine.txt').read())\"; ls /usr/bin >/dev/null")
        assert twin["stdout"] == "mine\n\n" and twin["exit_code"] == 0
        # No read allow-list: the same read works (the policy did not restrict it).
        open_policy = {**POLICY, "paths": {"write": {"allow": ["./**"]}}}
        free = run_bash(ws, f'python3 -c "{code}"', open_policy)
        assert free["stdout"] == "OTHER PROJECT\n\n"
    finally:
        for f in other.iterdir():
            f.unlink()
        other.rmdir()


@pytest.mark.needs_sandbox
def test_without_a_compiler_bubblewrap_alone_enforces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charter.sandbox import landlock

    if not available().ok:
        pytest.skip("no sandbox here")
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("CHARTER_CACHE_DIR", str(tmp_path / "cache"))
    landlock.build_helper(refresh=True)
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "secrets").mkdir()
        (ws / "secrets" / "t").write_text("TOPSECRET")
        policy = {**POLICY, "paths": {"allow": ["./**"], "deny": ["./secrets/**"]}}
        hostile = run_bash(ws, "cat secrets/t; echo x > /etc/charter-ll-test", policy)
        assert "TOPSECRET" not in str(hostile["stdout"])
        assert not os.path.exists("/etc/charter-ll-test")
        receipt = hostile["sandbox"]
        assert isinstance(receipt, dict) and receipt["landlock"] == []
        assert any("compiling the Landlock helper failed" in n for n in receipt["notes"])
        twin = run_bash(ws, "echo ok > made.txt && cat made.txt", policy)
        assert twin["stdout"] == "ok\n"
    finally:
        monkeypatch.undo()
        landlock.build_helper(refresh=True)


@pytest.mark.needs_sandbox
def test_a_helper_hidden_by_a_mask_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charter.sandbox import landlock

    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "t").write_text("TOPSECRET")
    monkeypatch.setenv("CHARTER_CACHE_DIR", str(ws / "secrets" / "cache"))
    built = landlock.build_helper(refresh=True)
    try:
        if built.path is None:
            pytest.skip(f"no Landlock helper: {built.reason}")
        policy = {**POLICY, "paths": {"allow": ["./**"], "deny": ["./secrets/**"]}}
        hostile = run_bash(ws, "cat secrets/t", policy)
        assert "TOPSECRET" not in str(hostile["stdout"])
        receipt = hostile["sandbox"]
        assert isinstance(receipt, dict) and receipt["landlock"] == []
        assert any("under a path the policy masks" in n for n in receipt["notes"])
        twin = run_bash(ws, "echo ok", policy)
        assert twin["stdout"] == "ok\n"
    finally:
        monkeypatch.undo()
        landlock.build_helper(refresh=True)
