"""Red team across calls: a scripted model drives ``agent_loop`` with the built-in tools
under the issue's persona, and each test checks the effect on the host (a file's content
reaching the model, the host file, a socket listener, the user's next unsandboxed
command), with an allowed twin that must still work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop, builtin_tools
from charter.sandbox import available

#: The persona the attacks ran under (issue 29).
POLICY: dict[str, Any] = {
    "paths": {"allow": ["./"], "deny": ["./secrets/**", "~/.ssh/**"]},
    "commands": {"allow": ["git:*", "python3:*", "cat:*", "ls:*", "mv:*", "mkdir:*", "echo:*"]},
    "network": {"deny": ["*"]},
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_sandbox: runs commands under bubblewrap")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    info = available()
    if info.ok:
        return
    skip = pytest.mark.skip(reason="no sandbox here: " + "; ".join(info.reasons))
    for item in items:
        if "needs_sandbox" in item.keywords:
            item.add_marker(skip)


def tc(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    """A scripted tool-call turn."""
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}


def sh(command: str) -> dict[str, Any]:
    """A scripted ``bash`` call."""
    return tc("bash", command=command)


def run(ws: Path, *turns: dict[str, Any], policy: dict[str, Any] | None = None) -> list[Any]:
    """Drive ``agent_loop`` through ``turns``; the tool results, in order (JSON decoded
    when they are JSON)."""
    provider = MockProvider([*turns, "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=builtin_tools(str(ws)),
        workspace=str(ws),
        policy=POLICY if policy is None else policy,
    )
    out: list[Any] = []
    for message in result.transcript["messages"]:
        if message["role"] != "tool":
            continue
        content = message["content"]
        try:
            out.append(json.loads(content))
        except (TypeError, ValueError):
            out.append(content)
    return out


def text(obs: Any) -> str:
    """Everything a tool result showed the model."""
    return obs if isinstance(obs, str) else json.dumps(obs)


def many(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A scripted turn with several tool calls (run concurrently when the loop allows)."""
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


def observations(result: Any) -> list[str]:
    """What the model was shown of each tool call, in order (as the raw strings)."""
    return [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]


def run_loop(ws: Path, policy: dict[str, Any], *turns: dict[str, Any], **options: Any) -> list[str]:
    """Drive ``agent_loop`` in ``ws`` under ``policy`` with scripted ``turns``; loop options
    pass through, ``tool_options`` go to ``builtin_tools``."""
    tools = builtin_tools(str(ws), **options.pop("tool_options", {}))
    provider = MockProvider([*turns, "done"])
    result = agent_loop(
        "x", provider=provider, tools=tools, workspace=str(ws), policy=policy, **options
    )
    return observations(result)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a denied ``secrets/`` tree and public files."""
    root = tmp_path / "ws"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "token.txt").write_text("TOKEN=hunter2\n")
    (root / "secrets" / "a.txt").write_text("TOKEN=hunter2\n")
    (root / "src").mkdir()
    (root / "src" / "a.txt").write_text("hello\n")
    (root / "notes.txt").write_text("public notes\n")
    return root


def commit_twice(ws: Path, add: list[str], changed: Path, text: str) -> Path:
    """Make ``ws`` a git repository with two commits: ``add`` (``-A`` for everything),
    then ``changed`` rewritten to ``text``; for tests reading history through git."""
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "a@example.com")
    git("config", "user.name", "a")
    git("add", *add)
    git("commit", "-qm", "one")
    changed.write_text(text)
    git("commit", "-qam", "two")
    return ws
