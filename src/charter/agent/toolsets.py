"""One loop's tools, gathered from their sources, with every name used once.

A loop's tools come from several places: the ``tools`` option, ``ask_user``, the
lifecycle tool, ``members`` (``delegate``), ``skills`` (``skill``), ``progress_tool``,
and each MCP server. Two with the same (canonical) name would leave the model one
schema and the dispatcher one handler, silently: :func:`check_unique` refuses that,
naming both sources (as pydantic-ai's ``CombinedToolset`` does).
"""

from __future__ import annotations

from collections.abc import Sequence

from charter.policy.names import canonical_name

from .options import AgentOptionError
from .tools import Tool


def describe(tool: Tool, index: int | None = None) -> str:
    """Where ``tool`` came from, for an error message."""
    if tool.mcp is not None:
        return f"MCP server {tool.mcp[0]!r} (its tool {tool.mcp[1]!r})"
    handler = tool.handler
    where = f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', '?')}"
    if index is not None:
        return f"tools[{index}] ({where})"
    return where


def check_unique(tools: Sequence[Tool], user_tools: Sequence[Tool] = ()) -> None:
    """Raise :class:`AgentOptionError` (option ``tools``) when two tools share a name.

    ``user_tools`` are the ``tools`` option's own, named by their index there."""
    index = {id(t): i for i, t in enumerate(user_tools)}
    seen: dict[str, Tool] = {}
    for tool in tools:
        key = canonical_name(tool.name)
        first = seen.get(key)
        if first is None:
            seen[key] = tool
            continue
        raise AgentOptionError(
            "tools",
            f"two tools are named {tool.name!r}: {describe(first, index.get(id(first)))} and "
            f"{describe(tool, index.get(id(tool)))}; rename one (the model would see one "
            "schema and only one of them could run)",
        )
