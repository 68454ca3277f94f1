"""An MCP-backed agent with a server allowlist.

Two stdio MCP servers are configured; the policy allows only ``docs``. The ``shell``
server is never started, and a call to one of its tools is rejected at dispatch.
Run: python examples/agents/mcp_allowlist.py   (needs the 'providers' extra: mcp)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from _provider import choose

from charter.agent import agent_loop

SERVER = Path(__file__).resolve().parents[2] / "tests" / "agent" / "servers" / "tiny_mcp.py"
LOG = Path(tempfile.mkdtemp()) / "mcp.log"


def server(name: str) -> dict[str, object]:
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"MCP_LOG": str(LOG), "MCP_NAME": name},
    }


if __name__ == "__main__":
    provider, model = choose(
        [
            {"tool_calls": [{"name": "shell__store", "arguments": {"key": "k", "value": "v"}}]},
            {"tool_calls": [{"name": "docs__lookup", "arguments": {"term": "charter"}}]},
            "charter: personas with enforced charters.",
        ]
    )
    result = agent_loop(
        "Define 'charter' using the docs server.",
        provider=provider,
        model=model,
        mcp_servers=[server("docs"), server("shell")],
        policy={"mcp_servers": ["docs"], "side_effect_level": "read_only"},
    )
    print("status:", result.status)
    print("successful:", result.tools.successful, "rejected:", result.tools.rejected)
    print("server calls:", LOG.read_text().splitlines() if LOG.exists() else [])
    print(result.visible_text)
