"""Reply bodies for the fake model servers, shaped as each API documents them.

``reply(route, text, calls)`` for ``route`` in ``openai`` (Chat Completions),
``openai-responses`` and ``anthropic``: ``calls`` are ``(id, name, arguments-dict)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Call = tuple[str, str, dict[str, Any]]
ROUTES = ("openai", "openai-responses", "anthropic")


def chat(text: str | None, calls: Sequence[Call] = ()) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
    return {
        "json": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
        }
    }


def responses(text: str | None, calls: Sequence[Call] = ()) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if text:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for i, n, a in calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": i,
                "name": n,
                "arguments": json.dumps(a),
                "status": "completed",
            }
        )
    return {
        "json": {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "m",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 9,
                "output_tokens": 3,
                "total_tokens": 12,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    }


def anthropic(text: str | None, calls: Sequence[Call] = ()) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    content.extend({"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls)
    return {
        "json": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 6},
        }
    }


def reply(route: str, text: str | None, calls: Sequence[Call] = ()) -> dict[str, Any]:
    return {"openai": chat, "openai-responses": responses, "anthropic": anthropic}[route](
        text, calls
    )


def provider_for(route: str, url: str, **kwargs: Any) -> Any:
    """The SDK-backed provider for ``route`` speaking to the fake server at ``url``."""
    from charter.agent import get_provider

    if route == "anthropic":
        return get_provider("anthropic", base_url=url, api_key="k", **kwargs)
    return get_provider(route, base_url=url + "/v1", api_key="k", **kwargs)
