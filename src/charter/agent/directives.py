"""Carrying out a ``before_dispatch`` directive: the turn's calls are replaced, answered
without running, or answered and the loop stops.

Every tool call that stays in the transcript gets its result message (OpenAI answers 400
to an assistant turn whose ``tool_calls`` lack results, Anthropic to a ``tool_use``
without its ``tool_result``), so a history that is resent, continued in a session or
resumed from a snapshot stays valid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .options import AgentOptionError
from .providers.base import ToolCallRequest
from .textmode import render_tool_result


def answer_messages(
    calls: Sequence[ToolCallRequest],
    native: bool,
    note: str,
    answers: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The result messages answering ``calls`` without running them: ``answers[call.id]``
    where given, else ``note`` (native: one ``tool`` message per call; text mode: one user
    message of ``<tool_result>`` blocks)."""
    given = answers or {}
    if not calls:
        return []
    if native:
        return [
            {
                "role": "tool",
                "tool_call_id": call.id,
                "name": call.name,
                "content": given.get(call.id, note),
            }
            for call in calls
        ]
    blocks = [render_tool_result(c.name, c.id, given.get(c.id, note)) for c in calls]
    return [{"role": "user", "content": "\n".join(blocks)}]


def apply_directive(
    run: Any,
    directive: Mapping[str, Any],
    assistant: dict[str, Any],
    calls: list[ToolCallRequest],
    native: bool,
) -> str | None:
    """Carry out a ``before_dispatch`` objection; a stop reason when the loop ends.

    ``replace``: the model regenerates the turn (the assistant message is dropped);
    ``retain`` / ``stop``: the calls stay, each answered (``directive["answers"]`` by
    call id, else a "not executed" note)."""
    action = directive.get("action")
    feedback = directive.get("feedback")
    if action == "replace":
        # the model regenerates this turn; a rewrite is a new list (see prompt_messages)
        run.messages = [m for m in run.messages if m is not assistant]
        run.rewrites += 1
    elif action in ("retain", "stop"):
        why = "the loop stopped" if action == "stop" else "the step judge rejected it"
        run.messages.extend(
            answer_messages(calls, native, f"[not executed: {why}]", directive.get("answers"))
        )
    else:
        raise AgentOptionError("before_dispatch", f"unknown directive action {action!r}")
    if action == "stop":
        return str(directive.get("stop_reason") or "before_dispatch_stop")
    if feedback:
        run.messages.append({"role": "user", "content": str(feedback)})
    return None
