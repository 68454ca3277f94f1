from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop
from charter.agent.suspension import TOOL as LIFECYCLE
from charter.policy import AgentScope

from .conftest import tc

pytest.importorskip("mcp")
SERVER = str(Path(__file__).parent / "servers" / "tiny_mcp.py")


def spec(name: str, log: Path, *, trusted: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "trusted": trusted,  # its tool annotations count (the hints are the server's claims)
        "command": sys.executable,
        "args": [SERVER],
        "env": {"MCP_LOG": str(log), "MCP_NAME": name},
    }


def _tool_messages(result: Any) -> list[str]:
    return [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]


def test_mcp_stdio_tools_listed_called_and_decided(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    provider = MockProvider(
        [
            tc("kb__lookup", term="charter"),
            tc("kb__store", key="k", value="v"),
            tc("kb__ping"),
            "done",
        ]
    )
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[spec("kb", log)],
        policy={"side_effect_level": "workspace_write"},
        workspace=str(tmp_path),
    )
    names = sorted(t["name"] for t in provider.requests[0].tools if t["name"] != LIFECYCLE)
    # tools/list, namespaced; ping declares no level (counts as network): above the
    # workspace_write ceiling, so not offered, and denied when called anyway
    assert names == ["kb__lookup", "kb__store"]
    obs = _tool_messages(result)
    assert obs[0] == "definition of charter" and obs[1] == "stored"
    assert "permission_denied" in obs[2] and "declares no level" in obs[2]
    assert log.read_text().splitlines() == ["lookup charter", "store k"]  # ping never ran
    assert result.tools.successful == ["kb__lookup", "kb__store"]
    assert result.tools.rejected == ["kb__ping"]


def test_mcp_server_allowlist_filters_servers_and_calls(tmp_path: Path) -> None:
    good_log, bad_log = tmp_path / "good.log", tmp_path / "bad.log"
    provider = MockProvider(
        [tc("evil__store", key="a", value="b"), tc("good__lookup", term="t"), "done"]
    )
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[spec("good", good_log), spec("evil", bad_log)],
        scope=AgentScope(mcps=("good",)),
        workspace=str(tmp_path),
    )
    visible = {t["name"] for t in provider.requests[0].tools}
    assert "good__lookup" in visible and not any(n.startswith("evil__") for n in visible)
    obs = _tool_messages(result)
    assert "permission_denied" in obs[0]
    assert not bad_log.exists()  # the forbidden server was never started, its tool never ran
    assert good_log.read_text().splitlines() == ["lookup t"]
    assert "<scope>" in (provider.requests[0].system or "")


def test_a_failing_second_server_raises_mcp_server_error(tmp_path: Path) -> None:
    # the first server is open when the second fails: its transport's task groups used to
    # wrap the error in nested ExceptionGroups, which `except McpServerError` misses
    from charter.agent.mcp import McpServerError

    provider = MockProvider(["done"])
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server")}
    with pytest.raises(McpServerError, match="'broken'") as caught:
        agent_loop(
            "x",
            provider=provider,
            mcp_servers=[spec("good", tmp_path / "good.log"), broken],
            workspace=str(tmp_path),
        )
    assert not isinstance(caught.value, BaseExceptionGroup)
    assert provider.requests == []  # no model call with half the tools


def test_an_error_raised_while_servers_are_open_arrives_unwrapped(tmp_path: Path) -> None:
    from charter.agent import AgentOptionError, make_tool

    def lookup(term: str) -> str:
        return term

    clash = make_tool(lookup, name="kb__lookup", side_effect_level="read_only")
    with pytest.raises(AgentOptionError, match="MCP server 'kb'") as caught:
        agent_loop(
            "x",
            provider=MockProvider(["done"]),
            tools=[clash],
            mcp_servers=[spec("kb", tmp_path / "kb.log")],
            workspace=str(tmp_path),
        )
    assert "tools[0]" in str(caught.value)
