"""A small stdio MCP server for tests. Every tools/call appends a line to $MCP_LOG."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer(os.environ.get("MCP_NAME", "tiny"))


def _log(line: str) -> None:
    with open(os.environ["MCP_LOG"], "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def lookup(term: str) -> str:
    """Look a term up."""
    _log(f"lookup {term}")
    return f"definition of {term}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
def store(key: str, value: str) -> str:
    """Store a value."""
    _log(f"store {key}")
    return "stored"


@server.tool()
def ping() -> str:
    """Unannotated: counts as network."""
    _log("ping")
    return "pong"


if __name__ == "__main__":
    sys.exit(server.run())
