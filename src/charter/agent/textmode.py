"""Text-mode tool calling: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` tags."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .providers.base import ToolCallRequest

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
DONE_TAG = "<done>##DONE##</done>"
DEFAULT_SENTINEL = "##DONE##"


def has_tool_call_tags(text: str) -> bool:
    return "<tool_call>" in text and _TAG.search(text) is not None


def parse_tool_calls(text: str, *, id_prefix: str = "text") -> list[ToolCallRequest]:
    """Every ``<tool_call>`` block in ``text``; malformed blocks carry ``parse_error``."""
    calls: list[ToolCallRequest] = []
    for index, match in enumerate(_TAG.finditer(text)):
        body = match.group(1)
        call_id = f"{id_prefix}_{index + 1}"
        try:
            data: Any = json.loads(body)
        except json.JSONDecodeError as exc:
            calls.append(ToolCallRequest(call_id, "", {}, f"invalid JSON in <tool_call>: {exc}"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            calls.append(
                ToolCallRequest(call_id, "", {}, "<tool_call> must be an object with a 'name'")
            )
            continue
        args = data.get("arguments", data.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = None
        if not isinstance(args, dict):
            calls.append(
                ToolCallRequest(call_id, data["name"], {}, "'arguments' must be a JSON object")
            )
            continue
        calls.append(ToolCallRequest(call_id, data["name"], args))
    return calls


def strip_tool_calls(text: str) -> str:
    return _TAG.sub("", text)


def strip_sentinel(text: str, sentinel: str | None) -> str:
    out = text.replace(DONE_TAG, "")
    if sentinel:
        out = out.replace(f"<done>{sentinel}</done>", "").replace(sentinel, "")
    return out


def visible(text: str, sentinel: str | None) -> str:
    """Human-visible text: no ``<tool_call>`` blocks, no completion sentinel."""
    if not text:  # a tool-only turn: nothing to strip
        return ""
    return strip_sentinel(strip_tool_calls(text), sentinel).strip()


def tool_contract(tools: Sequence[dict[str, Any]], sentinel: str | None) -> str:
    """The system-prompt section that teaches a text-mode model the tool-call format."""
    lines = [
        "## Tools",
        "Call a tool by writing exactly one block per call:",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "Each result comes back in a <tool_result> block in the next message.",
        "Available tools:",
    ]
    for schema in tools:
        lines.append(
            f"- {schema['name']}: {schema.get('description') or ''} "
            f"parameters: {json.dumps(schema.get('parameters', {}), sort_keys=True)}"
        )
    if sentinel:
        lines.append(f"When the task is complete, write <done>{sentinel}</done>.")
    return "\n".join(lines)


def render_tool_result(name: str, call_id: str, rendered: str) -> str:
    return f'<tool_result name="{name}" id="{call_id}">\n{rendered}\n</tool_result>'
