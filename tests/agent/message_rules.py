"""The providers' conversation rules, as their APIs enforce them (HTTP 400).

A fake server that accepts what the real API refuses hides bugs (a resumed loop that
resent a tool call with no result passed the mock and failed against OpenAI). Each
checker returns ``None`` for a valid request or the error body the provider sends, with
the provider's own wording:

- OpenAI Chat Completions: an assistant message with ``tool_calls`` must be followed by
  a ``tool`` message for each ``tool_call_id`` (before any other message); a ``tool``
  message must answer a preceding ``tool_calls`` entry.
- OpenAI Responses: every ``function_call`` item has a ``function_call_output`` with its
  ``call_id`` and every output has its call.
- Anthropic Messages: the first message is the user's; ``tool_use`` blocks are answered
  by ``tool_result`` blocks in the *next* (user) message, and a ``tool_result`` must
  answer a ``tool_use`` of the message just before it.
"""

from __future__ import annotations

from typing import Any


def _openai_error(message: str, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": None,
        }
    }


def _anthropic_error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def check_chat(body: dict[str, Any]) -> dict[str, Any] | None:
    messages = body.get("messages") or []
    open_ids: list[str] = []
    answered: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                return _openai_error(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{index}].role",
                )
            answered.add(str(call_id))
            continue
        missing = [c for c in open_ids if c not in answered]
        if missing:
            return _openai_error(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(missing)}",
                "messages",
            )
        open_ids, answered = [], set()
        if role == "assistant":
            open_ids = [str(c.get("id")) for c in message.get("tool_calls") or []]
    missing = [c for c in open_ids if c not in answered]
    if missing:
        return _openai_error(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(missing)}",
            "messages",
        )
    return None


def check_responses(body: dict[str, Any]) -> dict[str, Any] | None:
    items = body.get("input")
    if not isinstance(items, list):
        return None
    calls = [i.get("call_id") for i in items if i.get("type") == "function_call"]
    outputs = [i.get("call_id") for i in items if i.get("type") == "function_call_output"]
    for call_id in calls:
        if call_id not in outputs:
            return _openai_error(f"No tool output found for function call {call_id}.", "input")
    for call_id in outputs:
        if call_id not in calls:
            return _openai_error(
                f"No tool call found for function call output with call_id {call_id}.", "input"
            )
    return None


def check_messages(body: dict[str, Any]) -> dict[str, Any] | None:
    messages = body.get("messages") or []
    if messages and messages[0].get("role") != "user":
        return _anthropic_error('messages: first message must use the "user" role')
    pending: list[str] = []
    for index, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if pending:
            missing = [p for p in pending if p not in results or message.get("role") != "user"]
            if missing:
                return _anthropic_error(
                    f"messages.{index - 1}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(missing)}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
        for position, result_id in enumerate(results):
            if result_id not in pending:
                return _anthropic_error(
                    f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {result_id}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
        pending = []
        if message.get("role") == "assistant":
            pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
    if pending:
        return _anthropic_error(
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(pending)}. Each `tool_use` block must have "
            "a corresponding `tool_result` block in the next message."
        )
    return None


def check(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The provider's 400 body for an invalid request at ``path``, else ``None``."""
    if path.endswith("/chat/completions"):
        return check_chat(body)
    if path.endswith("/responses"):
        return check_responses(body)
    if path.endswith("/messages"):
        return check_messages(body)
    return None
