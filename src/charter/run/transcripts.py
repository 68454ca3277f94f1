"""A run's agent transcripts, kept in the event log so any host can show them.

Each ``ctx.agent(...)`` call of a run leaves its prompt-visible conversation (system
prompt, messages with tool calls and results); at the end of the run they are written
as one ``persona.run.transcript`` event, bounded so a long conversation cannot bloat the
log: each message's text is cut to :data:`MAX_TEXT` characters, at most
:data:`MAX_MESSAGES` messages per agent call are kept (the first two and the latest),
and the event notes what was cut.
"""

from __future__ import annotations

import json
from typing import Any

MAX_TEXT = 4000
MAX_MESSAGES = 200


def _cut(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            return value[:MAX_TEXT] + f"... [{len(value) - MAX_TEXT} more characters]", True
        return value, False
    if isinstance(value, list):
        cut = False
        items = []
        for item in value:
            new, was = _cut(item)
            items.append(new)
            cut = cut or was
        return items, cut
    if isinstance(value, dict):
        cut = False
        out = {}
        for key, item in value.items():
            new, was = _cut(item)
            out[str(key)] = new
            cut = cut or was
        return out, cut
    return value, False


def entry(transcript: dict[str, Any], *, status: str, model: str | None) -> dict[str, Any]:
    """One agent call's transcript, bounded and JSON-safe."""
    messages = list(transcript.get("messages") or [])
    dropped = 0
    if len(messages) > MAX_MESSAGES:
        dropped = len(messages) - MAX_MESSAGES
        messages = messages[:2] + messages[-(MAX_MESSAGES - 2) :]
    safe = json.loads(json.dumps(messages, default=str))
    safe, cut = _cut(safe)
    system, system_cut = _cut(transcript.get("system") or "")
    return {
        "session_id": transcript.get("session_id"),
        "status": status,
        "model": model,
        "system": system,
        "messages": safe,
        "dropped_messages": dropped,
        "truncated": bool(cut or system_cut or dropped),
    }


__all__ = ["MAX_MESSAGES", "MAX_TEXT", "entry"]
