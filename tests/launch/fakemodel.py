"""A fake model server on 127.0.0.1 that logs which tools each coding CLI offers its model.

It answers the Anthropic Messages API (JSON and SSE), the OpenAI Responses and Chat
Completions APIs (SSE) and Gemini ``generateContent`` / ``streamGenerateContent`` /
``countTokens``, plus ``GET .../models``. Each request is logged with the tool names
offered and any tool results. ``call`` makes it ask the CLI to call one tool once (the
first request offering that tool), so the next request's tool result shows whether a
path or command rule held.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    done: bool = False


@dataclass
class FakeModel:
    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    call: Call | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tool_sets(self) -> list[list[str]]:
        return [r["tools"] for r in self.requests if r["tools"] is not None]

    def main_tools(self) -> list[str]:
        """The tools of the request that offered the most (title/router requests offer none)."""
        sets = self.tool_sets()
        return max(sets, key=len) if sets else []

    def tool_results(self) -> list[str]:
        return [text for r in self.requests for text in r["results"]]


def _anthropic_tools(body: dict[str, Any]) -> list[str]:
    return [str(t.get("name")) for t in body.get("tools") or []]


def _responses_tools(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        kind = tool.get("type")
        if kind == "function":
            names.append(str(tool.get("name")))
        elif kind == "namespace":
            prefix = str(tool.get("name"))
            names.append(prefix)
            names.extend(f"{prefix}/{c.get('name')}" for c in tool.get("tools") or [])
        else:
            names.append(str(kind))
    return names


def _chat_tools(body: dict[str, Any]) -> list[str]:
    return [str(t.get("function", {}).get("name")) for t in body.get("tools") or []]


def _gemini_tools(body: dict[str, Any]) -> list[str]:
    return [
        str(f.get("name"))
        for t in body.get("tools") or []
        for f in t.get("functionDeclarations") or []
    ]


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)


def _results(path: str, body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if "/messages" in path:
        for msg in body.get("messages") or []:
            content = msg.get("content")
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out.append(" ".join(_texts(block.get("content"))))
    elif "/responses" in path:
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                out.append(" ".join(_texts(item.get("output"))))
    elif "/chat/completions" in path:
        for msg in body.get("messages") or []:
            if msg.get("role") == "tool":
                out.append(" ".join(_texts(msg.get("content"))))
    else:
        for content in body.get("contents") or []:
            for part in content.get("parts") or []:
                if "functionResponse" in part:
                    out.append(json.dumps(part["functionResponse"]))
    return out


def _instance(schema: Any) -> Any:
    """A value that fits a (simple) JSON schema."""
    if not isinstance(schema, dict):
        return "ok"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _instance(v) for k, v in props.items()}
    if kind == "array":
        return [_instance(schema.get("items"))]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    return "flash"


def _handler(state: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, data: Any, status: int = 200) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def _sse(self, events: list[tuple[str | None, Any]]) -> None:
            chunks = []
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                chunks.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
            self._send(200, "".join(chunks).encode(), "text/event-stream")

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models") or "/models?" in self.path:
                self._json(
                    {
                        "object": "list",
                        "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}],
                        "models": [{"name": "models/fake-model", "slug": "fake-model"}],
                    }
                )
            else:
                self._json({})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            path = self.path
            if "/messages" in path and "count_tokens" not in path:
                tools = _anthropic_tools(body)
            elif "/responses" in path:
                tools = _responses_tools(body)
            elif "/chat/completions" in path:
                tools = _chat_tools(body)
            elif ":generateContent" in path or ":streamGenerateContent" in path:
                tools = _gemini_tools(body)
            else:
                tools = None
            with state.lock:
                call = None
                if (
                    state.call is not None
                    and not state.call.done
                    and tools
                    and state.call.tool in tools
                ):
                    call = state.call
                    call.done = True
                state.requests.append(
                    {"path": path, "tools": tools, "results": _results(path, body), "body": body}
                )
            if "count_tokens" in path:
                self._json({"input_tokens": 1})
            elif "/messages" in path:
                self._anthropic(body, call)
            elif "/responses" in path:
                self._responses(call)
            elif "/chat/completions" in path:
                self._chat(call)
            elif ":countTokens" in path:
                self._json({"totalTokens": 1})
            elif ":generateContent" in path or ":streamGenerateContent" in path:
                self._gemini(body, call, stream=":streamGenerateContent" in path)
            else:
                self._json({"error": {"message": f"unknown path {path}"}}, 404)

        def _anthropic(self, body: dict[str, Any], call: Call | None) -> None:
            usage = {"input_tokens": 1, "output_tokens": 1}
            if call is not None:
                block: dict[str, Any] = {
                    "type": "tool_use",
                    "id": "toolu_fake1",
                    "name": call.tool,
                    "input": {},
                }
                stop = "tool_use"
            else:
                block = {"type": "text", "text": ""}
                stop = "end_turn"
            if not body.get("stream"):
                content = dict(block)
                if call is not None:
                    content["input"] = call.args
                else:
                    content["text"] = "ok"
                self._json(
                    {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model", "fake"),
                        "content": [content],
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": usage,
                    }
                )
                return
            delta = (
                {"type": "input_json_delta", "partial_json": json.dumps(call.args)}
                if call is not None
                else {"type": "text_delta", "text": "ok"}
            )
            self._sse(
                [
                    (
                        "message_start",
                        {
                            "type": "message_start",
                            "message": {
                                "id": "msg_fake",
                                "type": "message",
                                "role": "assistant",
                                "model": body.get("model", "fake"),
                                "content": [],
                                "stop_reason": None,
                                "stop_sequence": None,
                                "usage": usage,
                            },
                        },
                    ),
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": 0, "content_block": block},
                    ),
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": delta},
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 1},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
            )

        def _responses(self, call: Call | None) -> None:
            if call is not None:
                item: dict[str, Any] = {
                    "type": "function_call",
                    "id": "fc_fake1",
                    "call_id": "call_fake1",
                    "name": call.tool,
                    "arguments": json.dumps(call.args),
                    "status": "completed",
                }
            else:
                item = {
                    "type": "message",
                    "id": "msg_fake1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
                }
            usage = {
                "input_tokens": 1,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 1,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 2,
            }
            self._sse(
                [
                    (
                        "response.created",
                        {
                            "type": "response.created",
                            "response": {"id": "resp_fake", "status": "in_progress"},
                        },
                    ),
                    (
                        "response.output_item.added",
                        {"type": "response.output_item.added", "output_index": 0, "item": item},
                    ),
                    (
                        "response.output_item.done",
                        {"type": "response.output_item.done", "output_index": 0, "item": item},
                    ),
                    (
                        "response.completed",
                        {
                            "type": "response.completed",
                            "response": {
                                "id": "resp_fake",
                                "status": "completed",
                                "output": [item],
                                "usage": usage,
                            },
                        },
                    ),
                ]
            )

        def _chat(self, call: Call | None) -> None:
            base = {
                "id": "chat_fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake-model",
            }
            if call is not None:
                delta: dict[str, Any] = {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_fake1",
                            "type": "function",
                            "function": {"name": call.tool, "arguments": json.dumps(call.args)},
                        }
                    ],
                }
                finish = "tool_calls"
            else:
                delta = {"role": "assistant", "content": "ok"}
                finish = "stop"
            self._sse(
                [
                    (
                        None,
                        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    ),
                    (
                        None,
                        {
                            **base,
                            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                            "usage": {
                                "prompt_tokens": 1,
                                "completion_tokens": 1,
                                "total_tokens": 2,
                            },
                        },
                    ),
                    (None, "[DONE]"),
                ]
            )

        def _gemini(self, body: dict[str, Any], call: Call | None, *, stream: bool) -> None:
            config = body.get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            if call is not None:
                part: dict[str, Any] = {"functionCall": {"name": call.tool, "args": call.args}}
            elif schema is not None or config.get("responseMimeType") == "application/json":
                part = {"text": json.dumps(_instance(schema))}
            else:
                part = {"text": "ok"}
            data = {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [part]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 1,
                    "candidatesTokenCount": 1,
                    "totalTokenCount": 2,
                },
                "modelVersion": "fake-model",
            }
            if stream:
                self._sse([(None, data)])
            else:
                self._json(data)

    return Handler


@contextmanager
def fake_model(call: Call | None = None) -> Iterator[FakeModel]:
    state = FakeModel(call=call)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
