"""The four real CLIs inside charter's OS sandbox (``--sandbox auto``, the default), against
the fake model on 127.0.0.1 (issue 11 §1).

For each CLI the fake model scripts one shell-tool call running an allowed interpreter
(``python3``) that tries three things the policy forbids and the CLI cannot see: read a
denied file, write outside the allowed roots, fetch from a loopback HTTP server under
``network.deny = ["*"]``. The test reads the tool result in the model's *next request*
(what reached the model) and the filesystem; the allowed twin (read an allowed file,
write inside the allowed root) must still work. The model's own traffic goes through the
sandbox's allow-listing proxy (the endpoint's host is added automatically), so every
request here crossed it.

The forbidden server listens on 127.0.0.2: the fake model itself is on 127.0.0.1, and an
endpoint host is allowed whole (any port), so 127.0.0.1 is reachable by design here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from . import realcli
from .fakemodel import Call
from .realcli import write_persona
from .test_real_clis import _need

POLICY = {
    "paths": {"deny": ["./secrets"], "write": {"allow": ["./"]}},
    "network": {"deny": ["*"]},
    "commands": {"allow": ["python3:*"]},
}

SCRIPT = """
import pathlib, urllib.request
root = pathlib.Path({root!r})
try:
    print("READ", (root / {read!r}).read_text().strip())
except Exception as e:
    print("READ-ERR", type(e).__name__)
try:
    (root / {write!r}).write_text("x")
    print("WRITE-OK")
except Exception as e:
    print("WRITE-ERR", type(e).__name__)
if {net!r}:
    try:
        print("NET", urllib.request.urlopen({net!r}, timeout=5).read().decode())
    except Exception as e:
        print("NET-ERR", type(e).__name__)
"""


class _Secret(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"NETSECRET"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def secret_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Secret)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.2:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "secrets").mkdir()
    (root / "secrets" / "x.txt").write_text("TOPSECRET\n")
    (root / "notes.txt").write_text("PUBLIC\n")
    (root / "src").mkdir()
    return root


def _command(tool: str, script: str) -> Call:
    line = f"python3 -c '{script}'"
    if tool == "claude":
        return Call("Bash", {"command": line, "description": "check"})
    if tool == "gemini":
        return Call("run_shell_command", {"command": line})
    if tool == "codex":
        return Call("exec_command", {"cmd": line})
    return Call("bash", {"command": line, "description": "check"})


def _launch(tool: str, repo: Path, script: str) -> str:
    _need(tool)
    write_persona(repo, POLICY)
    original = realcli._env

    def sandboxed_env(*args: object) -> dict[str, str]:
        env = original(*args)  # type: ignore[arg-type]
        env.pop("CHARTER_LAUNCH_SANDBOX")  # the default: auto
        return env

    realcli._env = sandboxed_env
    try:
        result = realcli.launch(tool, repo, call=_command(tool, script))
    finally:
        realcli._env = original
    assert result.proc.returncode == 0, result.proc.stderr[-3000:]
    assert result.saw_overlay(), "the model's traffic did not cross the sandbox's proxy"
    assert result.results, f"no tool result reached the model: {result.proc.stderr[-2000:]}"
    return "\n".join(result.results)


@pytest.mark.parametrize("tool", ["claude", "codex", "gemini", "opencode"])
def test_the_sandbox_holds_what_the_cli_cannot(tool: str, repo: Path, secret_server: str) -> None:
    # outside the allowed roots and outside /tmp (the sandbox's /tmp is private anyway)
    scratch = realcli.REAL_HOME / ".cache" / "charter" / "test-homes"
    scratch.mkdir(parents=True, exist_ok=True)
    outside = scratch / f"outside-{tool}-{os.getpid()}.txt"
    outside.unlink(missing_ok=True)
    hostile = SCRIPT.format(
        root=str(repo), read="secrets/x.txt", write=str(outside), net=secret_server
    )
    seen = _launch(tool, repo, hostile.replace("'", '"'))
    assert "TOPSECRET" not in seen and "READ-ERR" in seen
    assert "NETSECRET" not in seen and "NET-ERR" in seen
    assert not outside.exists() and "WRITE-ERR" in seen


@pytest.mark.parametrize("tool", ["claude", "codex", "gemini", "opencode"])
def test_the_allowed_twin_still_works(tool: str, repo: Path) -> None:
    twin = SCRIPT.format(root=str(repo), read="notes.txt", write="src/in.txt", net="")
    seen = _launch(tool, repo, twin.replace("'", '"'))
    assert "READ PUBLIC" in seen and "WRITE-OK" in seen
    assert (repo / "src" / "in.txt").read_text() == "x"
