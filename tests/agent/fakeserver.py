"""A protocol-faithful fake model server on 127.0.0.1 (JSON and SSE replies).

Every request is first checked against the provider's conversation rules
(:mod:`tests.agent.message_rules`): an invalid one gets the provider's HTTP 400 and its
error body, as the real API answers, and is recorded in ``rejected``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .message_rules import check

#: The model endpoints; replies without a ``path`` answer these, in order.
MODEL_ROUTES = ("/chat/completions", "/responses", "/messages")


class FakeServer:
    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []  # model calls
        #: Requests to other endpoints (Ollama's /api/show).
        self.other_requests: list[dict[str, Any]] = []
        #: Requests refused with 400 for breaking the provider's message rules.
        self.rejected: list[dict[str, Any]] = []
        self.url = ""


def _handler(state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            record = {
                "path": self.path,
                "json": json.loads(body or b"{}"),
                "headers": dict(self.headers),
            }
            model_call = self.path.endswith(MODEL_ROUTES)
            (state.requests if model_call else state.other_requests).append(record)
            refusal = check(self.path, record["json"])
            if refusal is not None:
                state.rejected.append({"path": self.path, "error": refusal})
                reply: dict[str, Any] = {"status": 400, "json": refusal}
            elif not model_call:
                # another endpoint (Ollama's /api/show): a reply naming its path, else 404
                match = next((r for r in state.replies if r.get("path") == self.path), None)
                if match is None:
                    reply = {"status": 404, "json": {"error": f"{self.path} not found"}}
                else:
                    state.replies.remove(match)
                    reply = match
            else:
                reply = state.replies.pop(0) if state.replies else {"status": 500, "json": {}}
            status = int(reply.get("status", 200))
            if "sse" in reply:
                self.send_response(status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for event in reply["sse"]:
                    if isinstance(event, tuple):
                        name, data = event
                        chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n"
                    elif event == "[DONE]":
                        chunk = "data: [DONE]\n\n"
                    else:
                        chunk = f"data: {json.dumps(event)}\n\n"
                    self.wfile.write(chunk.encode())
                    self.wfile.flush()
                self.close_connection = True
                return
            payload = reply["raw"] if "raw" in reply else json.dumps(reply.get("json")).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for key, value in (reply.get("headers") or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@contextmanager
def fake_server(replies: list[dict[str, Any]]) -> Iterator[FakeServer]:
    state = FakeServer(replies)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
