"""MCP over stdio with a real npm server: ``@modelcontextprotocol/server-filesystem``.

The server is installed by ``make mcp-npm`` (a dependency of ``make pytest``) from the
pinned lock in ``tests/agent/mcp_npm/`` into ``$CHARTER_MCP_NPM_DIR``, default
``${XDG_CACHE_HOME:-~/.cache}/charter/npm``. Under ``CI=true`` a missing install fails
the tests; elsewhere they skip, saying how to install it.

Every server runs behind ``servers/stdio_tap.py``, which logs each message the client
sends, so the tests can show that a denied call never reached the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop
from charter.policy import SideEffectLevel

from .conftest import tc

pytest.importorskip("mcp")

TAP = str(Path(__file__).parent / "servers" / "stdio_tap.py")
PACKAGE = "@modelcontextprotocol/server-filesystem"
#: Every tool the pinned version lists, with the level its MCP annotations give.
EXPECTED_LEVELS = {
    "read_file": SideEffectLevel.READ_ONLY,
    "read_text_file": SideEffectLevel.READ_ONLY,
    "read_media_file": SideEffectLevel.READ_ONLY,
    "read_multiple_files": SideEffectLevel.READ_ONLY,
    "write_file": SideEffectLevel.WORKSPACE_WRITE,
    "edit_file": SideEffectLevel.WORKSPACE_WRITE,
    "create_directory": SideEffectLevel.WORKSPACE_WRITE,
    "list_directory": SideEffectLevel.READ_ONLY,
    "list_directory_with_sizes": SideEffectLevel.READ_ONLY,
    "directory_tree": SideEffectLevel.READ_ONLY,
    "move_file": SideEffectLevel.WORKSPACE_WRITE,
    "search_files": SideEffectLevel.READ_ONLY,
    "get_file_info": SideEffectLevel.READ_ONLY,
    "list_allowed_directories": SideEffectLevel.READ_ONLY,
}


def _npm_dir() -> Path:
    explicit = os.environ.get("CHARTER_MCP_NPM_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "charter" / "npm"


def _server_bin() -> str:
    """The installed server's entry point, or skip (fail under ``CI=true``) saying why."""
    entry = _npm_dir() / "node_modules" / ".bin" / "mcp-server-filesystem"
    if shutil.which("node") is None:
        reason = "node is not installed: the npm MCP server tests need Node.js and npm"
    elif not entry.exists():
        reason = f"{PACKAGE} is not installed in {_npm_dir()}: run `make mcp-npm`"
    else:
        return str(entry)
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: this test must not be skipped)")
    pytest.skip(reason)


def fs_spec(root: Path, log: Path, **extra: Any) -> dict[str, Any]:
    """The filesystem server serving ``root``, behind the tap logging to ``log``."""
    return {
        "name": "filesystem",
        "trusted": True,  # the pinned reference server: its annotations count
        "command": sys.executable,
        "args": [TAP, str(log), _server_bin(), str(root)],
        **extra,
    }


#: ``read_text_file``'s ``path`` argument declared as a path, so path rules apply to it.
READ_PATH = {"read_text_file": {"kind": "read", "path_args": ["path"]}}


def tool_calls(log: Path) -> list[tuple[str, dict[str, Any]]]:
    """The ``tools/call`` requests that reached the server."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        message = json.loads(line)
        if message.get("method") == "tools/call":
            params = message["params"]
            out.append((params["name"], params.get("arguments") or {}))
    return out


def _tool_messages(result: Any) -> list[str]:
    return [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]


def test_filesystem_tools_listed_with_levels_from_their_annotations(tmp_path: Path) -> None:
    from charter.agent.mcp import connect_servers

    async def listed() -> dict[str, Any]:
        async with contextlib.AsyncExitStack() as stack:
            tools = await connect_servers([fs_spec(tmp_path, tmp_path / "tap.log")], stack)
            return {t.name: t for t in tools}

    tools = asyncio.run(listed())
    assert set(tools) == {f"filesystem__{name}" for name in EXPECTED_LEVELS}
    for name, level in EXPECTED_LEVELS.items():
        tool = tools[f"filesystem__{name}"]
        assert tool.annotations.side_effect_level is level, name
        assert tool.annotations.mcp_server == "filesystem"
        assert tool.mcp == ("filesystem", name)
    assert tool_calls(tmp_path / "tap.log") == []  # listing calls nothing


def test_filesystem_read_allowed_and_denied_calls_never_reach_server(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "public").mkdir(parents=True)
    (ws / "public" / "notes.txt").write_text("hello from npm\n")
    (ws / "private.txt").write_text("secret\n")
    log = tmp_path / "tap.log"
    provider = MockProvider(
        [
            tc("filesystem__read_text_file", path=str(ws / "public" / "notes.txt")),
            tc("filesystem__write_file", path=str(ws / "public" / "new.txt"), content="x"),
            tc("filesystem__list_directory", path=str(ws / "public")),
            tc("filesystem__read_text_file", path=str(ws / "private.txt")),
            tc("filesystem__read_text_file", path="/etc/hostname"),
            "done",
        ]
    )
    result = agent_loop(
        "x",
        provider=provider,
        # The server itself may read all of tmp_path; the policy is narrower.
        mcp_servers=[fs_spec(tmp_path, log, annotations=READ_PATH)],
        policy={
            "side_effect_level": "read_only",
            "tools": {"deny": ["filesystem__list_directory"]},
            "paths": {"allow": [str(ws / "public")]},
        },
        workspace=str(ws),
    )
    visible = {t["name"] for t in provider.requests[0].tools}
    assert "filesystem__read_text_file" in visible
    assert "filesystem__list_directory" not in visible  # denied by name: not offered

    obs = _tool_messages(result)
    assert obs[0].strip() == "hello from npm"  # allowed read, answered by the server
    assert "permission_denied" in obs[1] and "side_effect_level" in obs[1]  # level
    assert "permission_denied" in obs[2] and "tools.deny" in obs[2]  # tool deny
    # outside the policy's allowed paths (inside the server's root, which would serve it)
    assert "permission_denied" in obs[3] and "outside the allowed paths" in obs[3]
    # outside the server's root as well: refused by the policy before the server sees it
    assert "permission_denied" in obs[4] and "outside the allowed paths" in obs[4]
    assert "secret" not in "".join(obs)
    assert not (ws / "public" / "new.txt").exists()

    # only the allowed read reached the server
    assert tool_calls(log) == [("read_text_file", {"path": str(ws / "public" / "notes.txt")})]
    assert result.tools.successful == ["filesystem__read_text_file"]
    assert result.tools.rejected == [
        "filesystem__write_file",
        "filesystem__list_directory",
        "filesystem__read_text_file",
    ]


def test_filesystem_write_allowed_by_level_reaches_server(tmp_path: Path) -> None:
    log = tmp_path / "tap.log"
    target = tmp_path / "out.txt"
    provider = MockProvider(
        [tc("filesystem__write_file", path=str(target), content="written"), "done"]
    )
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[fs_spec(tmp_path, log)],
        policy={"side_effect_level": "workspace_write"},
        workspace=str(tmp_path),
    )
    assert result.tools.successful == ["filesystem__write_file"]
    assert target.read_text() == "written"
    assert [name for name, _ in tool_calls(log)] == ["write_file"]


def test_filesystem_server_denied_is_never_started(tmp_path: Path) -> None:
    log = tmp_path / "tap.log"
    (tmp_path / "a.txt").write_text("a")
    provider = MockProvider(
        [tc("filesystem__read_text_file", path=str(tmp_path / "a.txt")), "done"]
    )
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[fs_spec(tmp_path, log)],
        policy={"mcp_servers": {"deny": ["filesystem"]}},
        workspace=str(tmp_path),
    )
    assert not any(t["name"].startswith("filesystem__") for t in provider.requests[0].tools)
    obs = _tool_messages(result)
    assert "permission_denied" in obs[0]
    assert result.tools.rejected == ["filesystem__read_text_file"]
    assert not log.exists()  # the tap (and so the server) never ran
