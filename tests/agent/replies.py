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


# -- streamed replies (SSE), for agent_stream -------------------------------------------


def chat_sse(chunks: Sequence[str], calls: Sequence[Call] = ()) -> dict[str, Any]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": c}) for c in chunks]
    for index, (i, n, a) in enumerate(calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": i,
                            "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a)},
                        }
                    ]
                }
            )
        )
    events.append(chunk({}, "tool_calls" if calls else "stop"))
    events.append(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        }
    )
    events.append("[DONE]")
    return {"sse": events}


def responses_sse(chunks: Sequence[str], calls: Sequence[Call] = ()) -> dict[str, Any]:
    final = responses("".join(chunks) or None, calls)["json"]
    events: list[Any] = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**final, "status": "in_progress", "output": []},
            },
        ),
    ]
    for n, piece in enumerate(chunks, start=1):
        events.append(
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                    "sequence_number": n,
                },
            )
        )
    events.append(
        (
            "response.completed",
            {"type": "response.completed", "sequence_number": 99, "response": final},
        )
    )
    return {"sse": events}


def anthropic_sse(
    chunks: Sequence[str], calls: Sequence[Call] = (), thinking: str | None = None
) -> dict[str, Any]:
    events: list[Any] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": 1},
                },
            },
        )
    ]
    index = 0
    if thinking is not None:
        events += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": thinking},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": "sig"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
        index += 1
    if chunks:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for piece in chunks:
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for i, n, a in calls:
        events += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": i, "name": n, "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(a)},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
        index += 1
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": 6},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return {"sse": events}


def reply_sse(route: str, chunks: Sequence[str], calls: Sequence[Call] = ()) -> dict[str, Any]:
    return {"openai": chat_sse, "openai-responses": responses_sse, "anthropic": anthropic_sse}[
        route
    ](chunks, calls)
