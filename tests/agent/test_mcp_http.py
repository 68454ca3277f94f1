"""MCP over streamable HTTP: a real ``mcp`` SDK server (uvicorn) on 127.0.0.1.

The server runs in a thread with its own event loop; every ``tools/call`` it executes is
recorded in :attr:`HttpServer.calls`, so the tests can show which calls reached it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop
from charter.agent.mcp import McpServerError
from charter.agent.suspension import TOOL as LIFECYCLE
from charter.policy import AgentScope, SideEffectLevel

from .conftest import tc

pytest.importorskip("mcp")


class HttpServer:
    """An MCP server with three tools (read-only, closed-world write, unannotated)."""

    def __init__(self) -> None:
        import uvicorn
        from mcp.server.mcpserver import MCPServer
        from mcp_types import ToolAnnotations

        self.calls: list[str] = []
        server = MCPServer("remote")

        @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
        def lookup(term: str) -> str:
            """Look a term up."""
            self.calls.append(f"lookup {term}")
            return f"definition of {term}"

        @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
        def store(key: str, value: str) -> str:
            """Store a value."""
            self.calls.append(f"store {key}")
            return "stored"

        @server.tool()
        def ping() -> str:
            """Unannotated: counts as network."""
            self.calls.append("ping")
            return "pong"

        app = server.streamable_http_app(host="127.0.0.1")
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> HttpServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the MCP HTTP server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    with HttpServer() as server:
        yield server


@pytest.fixture
def remote(http_server: HttpServer) -> HttpServer:
    http_server.calls.clear()
    return http_server


def _tool_messages(result: Any) -> list[str]:
    return [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]


def test_http_tools_listed_with_levels(remote: HttpServer) -> None:
    from charter.agent.mcp import connect_servers

    async def listed() -> dict[str, Any]:
        async with contextlib.AsyncExitStack() as stack:
            spec = {"name": "remote", "url": remote.url, "trusted": True}
            tools = await connect_servers([spec], stack)
            return {t.name: t.annotations.side_effect_level for t in tools}

    assert asyncio.run(listed()) == {
        "remote__lookup": SideEffectLevel.READ_ONLY,
        "remote__store": SideEffectLevel.WORKSPACE_WRITE,
        "remote__ping": None,  # unannotated: decided as network
    }
    assert remote.calls == []


def test_http_tools_called_and_decided(remote: HttpServer, tmp_path: Path) -> None:
    provider = MockProvider(
        [
            tc("remote__lookup", term="charter"),
            tc("remote__store", key="k", value="v"),
            tc("remote__ping"),
            "done",
        ]
    )
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[{"name": "remote", "url": remote.url, "trusted": True}],
        policy={"side_effect_level": "workspace_write"},
        workspace=str(tmp_path),
    )
    names = sorted(t["name"] for t in provider.requests[0].tools if t["name"] != LIFECYCLE)
    assert names == ["remote__lookup", "remote__store"]  # ping (no level) is not offered
    obs = _tool_messages(result)
    assert obs[0] == "definition of charter" and obs[1] == "stored"
    assert "permission_denied" in obs[2] and "declares no level" in obs[2]
    assert remote.calls == ["lookup charter", "store k"]  # ping never reached the server
    assert result.status == "done"
    assert result.tools.successful == ["remote__lookup", "remote__store"]
    assert result.tools.rejected == ["remote__ping"]


def test_http_tool_deny_and_level_never_reach_server(remote: HttpServer, tmp_path: Path) -> None:
    provider = MockProvider(
        [tc("remote__store", key="k", value="v"), tc("remote__lookup", term="x"), "done"]
    )
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[{"name": "remote", "url": remote.url, "transport": "streamable-http"}],
        policy={"side_effect_level": "read_only", "tools": {"deny": ["remote__lookup"]}},
        workspace=str(tmp_path),
    )
    obs = _tool_messages(result)
    assert "permission_denied" in obs[0] and "side_effect_level" in obs[0]
    assert "permission_denied" in obs[1] and "tools.deny" in obs[1]
    assert remote.calls == []
    assert result.tools.rejected == ["remote__store", "remote__lookup"]


def test_http_server_outside_scope_is_never_contacted(remote: HttpServer, tmp_path: Path) -> None:
    provider = MockProvider([tc("remote__lookup", term="t"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        # a closed port: connecting would fail the run, so success shows it was not tried
        mcp_servers=[{"name": "remote", "url": "http://127.0.0.1:9/mcp"}],
        scope=AgentScope(mcps=("docs",)),
        workspace=str(tmp_path),
    )
    assert result.status == "done"
    assert "permission_denied" in _tool_messages(result)[0]
    assert remote.calls == []


def test_http_concurrent_calls_share_one_session(remote: HttpServer, tmp_path: Path) -> None:
    calls = [{"name": "remote__lookup", "arguments": {"term": t}} for t in ("a", "b", "c")]
    provider = MockProvider([{"tool_calls": calls}, "done"])
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[{"name": "remote", "url": remote.url}],
        max_concurrent_tools=3,
        workspace=str(tmp_path),
    )
    assert _tool_messages(result) == ["definition of a", "definition of b", "definition of c"]
    assert sorted(remote.calls) == ["lookup a", "lookup b", "lookup c"]


@pytest.mark.parametrize(
    ("server", "where"),
    [
        ({"name": "remote", "url": "http://127.0.0.1:9/mcp"}, "http://127.0.0.1:9/mcp"),
        ({"name": "local", "command": "/nonexistent/mcp-server"}, "/nonexistent/mcp-server"),
    ],
)
def test_unreachable_server_raises_a_named_error(
    server: dict[str, Any], where: str, tmp_path: Path
) -> None:
    with pytest.raises(McpServerError) as info:
        agent_loop(
            "x", provider=MockProvider(["done"]), mcp_servers=[server], workspace=str(tmp_path)
        )
    assert f"server '{server['name']}' ({where}) failed to start" in str(info.value)


def test_unknown_transport_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown transport 'sse'"):
        agent_loop(
            "x",
            provider=MockProvider(["done"]),
            mcp_servers=[{"name": "r", "url": "http://127.0.0.1:9/sse", "transport": "sse"}],
            workspace=str(tmp_path),
        )


@pytest.mark.parametrize("trusted", [False, True])
def test_hints_of_an_untrusted_server_are_claims(
    remote: HttpServer, tmp_path: Path, trusted: bool
) -> None:
    """``lookup`` says it is read-only. Under a read_only ceiling, only a server the
    persona trusts gets that believed; otherwise the call is network and never arrives."""
    provider = MockProvider([tc("remote__lookup", term="secret"), "done"])
    spec: dict[str, Any] = {"name": "remote", "url": remote.url}
    if trusted:
        spec["trusted"] = True
    result = agent_loop(
        "x",
        provider=provider,
        mcp_servers=[spec],
        policy={"side_effect_level": "read_only"},
        workspace=str(tmp_path),
    )
    (obs,) = _tool_messages(result)
    if trusted:
        assert obs == "definition of secret" and remote.calls == ["lookup secret"]
    else:
        assert "permission_denied" in obs and remote.calls == []


def test_trusted_must_be_a_boolean(remote: HttpServer, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'trusted' must be true or false"):
        agent_loop(
            "x",
            provider=MockProvider(["done"]),
            mcp_servers=[{"name": "remote", "url": remote.url, "trusted": "yes"}],
            workspace=str(tmp_path),
        )
