"""Class 10 of issue 29: secrets on the command line.

bubblewrap got the sandbox's environment as ``--setenv KEY VALUE`` arguments, readable
from ``/proc/<pid>/cmdline`` by every local user while the command (or a launched CLI)
ran. The environment now travels through a descriptor bubblewrap reads (``--args FD``):
a host-side reader scanning every process's command line during the call never sees
the secret, and the sandboxed command still gets it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop, make_tool
from charter.sandbox import run_command

from .conftest import POLICY, tc

pytestmark = pytest.mark.needs_sandbox

SECRET = "sk-ant-api03-" + "q" * 24


def _cmdlines() -> list[bytes]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    out.append(fh.read())
            except OSError:
                continue
    return out


def test_the_environment_is_not_on_any_command_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()

    async def deploy(command: str) -> dict[str, Any]:
        """Run a deploy step with the API token in its environment."""
        argv = ["bash", "--noprofile", "--norc", "-c", command]
        return await run_command(argv, workspace=str(ws), env={"API_TOKEN": SECRET})

    tool = make_tool(
        deploy,
        name="deploy",
        parameters={
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    )
    seen: list[bytes] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.extend(line for line in _cmdlines() if SECRET.encode() in line)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        check = (
            'sleep 1.5; python3 -c "import hashlib, os; '
            "print(hashlib.sha256(os.environ['API_TOKEN'].encode()).hexdigest())\""
        )
        provider = MockProvider([tc("deploy", command=check), "done"])
        result = agent_loop("x", provider=provider, tools=[tool], workspace=str(ws), policy=POLICY)
    finally:
        stop.set()
        watcher.join()
    tool_results = [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]
    # the twin: the command inside had the variable
    assert hashlib.sha256(SECRET.encode()).hexdigest() in tool_results[0], tool_results
    assert seen == []
