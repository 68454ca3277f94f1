"""MCP servers for the agent loop (``mcp_servers`` option), via the official ``mcp`` SDK.

``tools/list`` is called once per server; each tool is exposed as ``<server>__<tool>``
with ``mcp_server`` set in its annotations, and dispatched through ``tools/call`` after the
policy allowed it. A server the active stack denies (``mcp_servers`` dimension, decided
with :func:`charter.policy.decide_current_resource`) is never started.

Side-effect levels come from the MCP tool annotations only for a server the spec marks
``trusted: true``: ``open_world_hint`` -> ``network``, ``read_only_hint`` -> ``read_only``,
an explicit closed-world write -> ``workspace_write``. The hints are the server's claims
about itself, so an untrusted server's tools (the default) declare nothing and count as
``network``, as does an unannotated tool. A server spec may
override per tool with ``annotations: {tool: {...charter annotations...}}``, e.g. to declare
``path_args`` so the policy's path rules apply to the tool's arguments; an override that
names no ``side_effect_level`` keeps the level derived from the MCP annotations.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from charter.errors import CharterError
from charter.policy import SideEffectLevel, ToolAnnotations, decide_current_resource
from charter.policy.names import canonical_name

from .tools import Tool


def _spec_list(servers: Any) -> list[dict[str, Any]]:
    if isinstance(servers, Mapping):
        return [{"name": k, **dict(v)} for k, v in servers.items()]
    out = []
    for spec in servers:
        if not isinstance(spec, Mapping) or not spec.get("name"):
            raise ValueError("mcp_servers: each server needs a 'name'")
        out.append(dict(spec))
    return out


def annotations_from_mcp(
    server: str, ann: Any, override: Mapping[str, Any] | None, *, trusted: bool = False
) -> ToolAnnotations:
    """charter annotations for an MCP tool (untrusted or unannotated -> ``network``)."""
    level: SideEffectLevel | None = None
    if ann is not None and trusted:
        if getattr(ann, "open_world_hint", None):
            level = SideEffectLevel.NETWORK
        elif getattr(ann, "read_only_hint", None):
            level = SideEffectLevel.READ_ONLY
        elif getattr(ann, "open_world_hint", None) is False:
            level = SideEffectLevel.WORKSPACE_WRITE
    base = ToolAnnotations(side_effect_level=level, kind="other", mcp_server=server)
    if override:
        custom = ToolAnnotations.from_dict({"kind": "other", **override})
        if "side_effect_level" not in override:
            custom = replace(custom, side_effect_level=level)
        base = replace(custom, mcp_server=server)
    return base


def _render_result(result: Any) -> Any:
    texts = []
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        texts.append(text if text is not None else str(block))
    structured = getattr(result, "structured_content", None)
    if getattr(result, "is_error", False):
        return {"status": "error", "error": "\n".join(texts) or "MCP tool error"}
    if texts or structured is None:
        return "\n".join(texts)
    return {"status": "ok", "result": structured}


class McpServerError(CharterError, RuntimeError):
    """An allowed MCP server could not be started, reached, initialised or listed."""


#: ``transport`` values of a server spec (default: ``http`` with a ``url``, else ``stdio``).
_TRANSPORTS = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
}


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def connect_servers(
    servers: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    stack: contextlib.AsyncExitStack,
) -> list[Tool]:
    """Start each allowed server in ``stack`` and return its tools as charter Tools.

    A server that fails to start, connect, initialise or list its tools raises
    :class:`McpServerError` naming it (not the transport's bare task-group error).
    """
    tools: list[Tool] = []
    failure: McpServerError | None = None
    # The servers of this call are closed here when one fails, and the error raised only
    # after they are: raised while they were open, it would leave through their transports'
    # task groups and arrive wrapped in nested ExceptionGroups (``except McpServerError``
    # would miss it).
    async with contextlib.AsyncExitStack() as connected:
        for spec in _spec_list(servers):
            name = canonical_name(str(spec["name"]))
            if not decide_current_resource("mcp_servers", name).allowed:
                continue  # dispatch_mcp: a denied server is filtered out, never started
            trusted = spec.get("trusted", False)
            if not isinstance(trusted, bool):
                raise ValueError(f"mcp_servers: server {name!r}: 'trusted' must be true or false")
            given = spec.get("transport", "http" if spec.get("url") else "stdio")
            transport = _TRANSPORTS.get(str(given))
            if transport is None:
                raise ValueError(f"mcp_servers: unknown transport {given!r}")
            try:
                async with contextlib.AsyncExitStack() as attempt:
                    session, listing = await _open(spec, transport, attempt)
                    opened = attempt.pop_all()  # connected: closed with the others
            except Exception as exc:
                where = spec.get("url") if transport == "http" else spec.get("command")
                leaf = _first_leaf(exc)
                failure = McpServerError(
                    f"mcp_servers: server {name!r} ({where}) failed to start: "
                    f"{type(leaf).__name__}: {leaf}"
                )
                failure.__cause__ = leaf
                break
            connected.push_async_exit(opened)
            overrides = spec.get("annotations") or {}
            for mcp_tool in listing.tools:
                override = overrides.get(mcp_tool.name)
                tools.append(_wrap(session, name, mcp_tool, override, trusted))
        if failure is None:
            stack.push_async_exit(connected.pop_all())  # the caller's stack closes them
    if failure is not None:
        raise failure
    return tools


def single_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one error inside (possibly nested) exception groups, else the group itself.

    An error raised while MCP transports are open leaves through their task groups
    (anyio wraps it once per group); a caller should see the error it would have seen
    without them. Cancellations the groups add on the way are not errors of their own."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        elif not isinstance(exc, asyncio.CancelledError):
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 else group


async def _open(
    spec: Mapping[str, Any], transport: str, stack: contextlib.AsyncExitStack
) -> tuple[Any, Any]:
    """Connect to one server in ``stack``: its initialised session and ``tools/list``."""
    from mcp import ClientSession

    if transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=spec["command"],
            args=list(spec.get("args") or []),
            env=spec.get("env"),
            cwd=spec.get("cwd"),
        )
        read, write = await stack.enter_async_context(stdio_client(params))
    else:
        from mcp.client.streamable_http import streamable_http_client

        read, write = await stack.enter_async_context(streamable_http_client(spec["url"]))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session, await session.list_tools()


def _wrap(
    session: Any,
    server: str,
    mcp_tool: Any,
    override: Mapping[str, Any] | None,
    trusted: bool,
) -> Tool:
    raw_name = mcp_tool.name

    async def call(**arguments: Any) -> Any:
        result = await session.call_tool(raw_name, arguments)
        return _render_result(result)

    return Tool(
        name=f"{server}__{canonical_name(raw_name)}",
        handler=call,
        description=mcp_tool.description or "",
        parameters=dict(mcp_tool.input_schema or {"type": "object", "properties": {}}),
        annotations=annotations_from_mcp(server, mcp_tool.annotations, override, trusted=trusted),
        is_async=True,
        mcp=(server, raw_name),
    )
