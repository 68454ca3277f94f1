"""A minimal stdio MCP server: ``python3 mcpserver.py NAME`` offers one tool, ``NAME_echo``."""

import json
import sys

NAME = sys.argv[1] if len(sys.argv) > 1 else "alpha"
TOOL = {
    "name": f"{NAME}_echo",
    "description": f"Echo text back ({NAME}).",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def reply(msg_id: object, result: object = None, error: object = None) -> None:
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method = msg.get("method")
    if "id" not in msg:
        continue  # a notification
    params = msg.get("params") or {}
    if method == "initialize":
        reply(
            msg["id"],
            {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": NAME, "version": "1.0.0"},
            },
        )
    elif method == "tools/list":
        reply(msg["id"], {"tools": [TOOL]})
    elif method == "tools/call":
        text = json.dumps(params.get("arguments") or {})
        reply(msg["id"], {"content": [{"type": "text", "text": text}], "isError": False})
    elif method in ("resources/list",):
        reply(msg["id"], {"resources": []})
    elif method in ("resources/templates/list",):
        reply(msg["id"], {"resourceTemplates": []})
    elif method in ("prompts/list",):
        reply(msg["id"], {"prompts": []})
    elif method == "ping":
        reply(msg["id"], {})
    else:
        reply(msg["id"], error={"code": -32601, "message": f"method not found: {method}"})
