"""Self-parking: ``agent_await_resumption`` and ``parse_resume_conditions`` (seed 001).

Every loop exposes the model tool ``agent_await_resumption(reason, conditions?)``. It is
structural: the loop validates the conditions, writes a resumable worker snapshot (the
format :func:`charter.agent.resume_agent` reads, with the loop's whole policy stack as
one frame, so a resumed loop is never wider) and ends with ``status: "suspended"``,
``handle``, ``reason``, ``initiator: "self"``, ``conditions`` and
``iterations_completed``. The call is never dispatched as an ordinary tool; invalid
conditions come back to the model as the tool's error instead.

``ResumeConditions``: ``trigger`` (``provider.event``, the persona trigger syntax, or
``{provider, event, metadata?}``), ``timeout`` (seconds, > 0) and ``on_event`` (an
event kind or a list of them). Errors name the field path.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from charter.policy import current_stack
from charter.policy.effective import combined_policy

from . import telemetry
from .hooks import LoopHook
from .options import AgentOptionError
from .tools import Tool, make_tool

TOOL = "agent_await_resumption"


def _fail(field: str, message: str) -> AgentOptionError:
    return AgentOptionError(f"resume_conditions.{field}", message)


def parse_resume_conditions(conditions: Any = None) -> dict[str, Any] | None:
    """Validate and normalise ``{trigger?, timeout?, on_event?}`` (``None`` stays ``None``)."""
    from charter.manifest.syntax import TriggerName, check_event, parse_trigger

    if conditions is None:
        return None
    if not isinstance(conditions, Mapping):
        raise AgentOptionError(
            "resume_conditions", "expected a dict {trigger?, timeout?, on_event?}"
        )
    unknown = sorted(set(conditions) - {"trigger", "timeout", "on_event"})
    if unknown:
        raise _fail(unknown[0], "unknown field (expected trigger, timeout, on_event)")
    out: dict[str, Any] = {"trigger": None, "timeout": None, "on_event": None}
    trigger = conditions.get("trigger")
    if trigger is not None:
        spec: dict[str, Any]
        if isinstance(trigger, str):
            parsed = parse_trigger(trigger)
            if not isinstance(parsed, TriggerName):
                raise _fail("trigger", parsed)
            spec = {"provider": parsed.provider, "event": parsed.event}
        elif isinstance(trigger, Mapping):
            joined = f"{trigger.get('provider')}.{trigger.get('event')}"
            parsed = parse_trigger(joined)
            if not isinstance(parsed, TriggerName):
                raise _fail("trigger", parsed)
            metadata = trigger.get("metadata") or {}
            if not isinstance(metadata, Mapping):
                raise _fail("trigger.metadata", "expected a table of strings")
            spec = {"provider": parsed.provider, "event": parsed.event, "metadata": dict(metadata)}
        else:
            raise _fail("trigger", "expected 'provider.event' or {provider, event}")
        out["trigger"] = spec
    timeout = conditions.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise _fail("timeout", f"expected seconds > 0, got {timeout!r}")
        out["timeout"] = float(timeout)
    on_event = conditions.get("on_event")
    if on_event is not None:
        events = [on_event] if isinstance(on_event, str) else on_event
        if not isinstance(events, (list, tuple)) or not events:
            raise _fail("on_event", "expected an event kind or a list of them")
        for index, kind in enumerate(events):
            problem = check_event(kind) if isinstance(kind, str) else "expected a string"
            if problem:
                raise _fail(f"on_event[{index}]", problem)
        out["on_event"] = list(events)
    return out


def agent_await_resumption(reason: str, conditions: Any = None) -> dict[str, Any]:
    """The normalised park request the lifecycle tool and daemon idle both produce."""
    if not isinstance(reason, str) or not reason.strip():
        raise AgentOptionError("reason", "agent_await_resumption needs a reason")
    return {
        "action": "await_resumption",
        "reason": reason,
        "conditions": parse_resume_conditions(conditions),
    }


def _tool_handler(reason: str, conditions: dict[str, Any] | None = None) -> dict[str, Any]:
    """Park this agent until it is resumed (the loop ends with status suspended)."""
    # reached only when the request was invalid (valid ones never dispatch): say why
    try:
        agent_await_resumption(reason, conditions)
    except AgentOptionError as exc:
        return {"status": "error", "error": str(exc)}
    return {"status": "error", "error": "agent_await_resumption is handled by the loop"}


def await_tool() -> Tool:
    return make_tool(
        _tool_handler,
        name=TOOL,
        description=(
            "Park this agent until something happens: give a reason and optional conditions "
            "{trigger: 'provider.event', timeout: seconds, on_event: kind}. The run ends as "
            "suspended and is resumed later with its conversation."
        ),
        parameters={
            "type": "object",
            "properties": {
                "reason": {"type": "string"},
                "conditions": {"type": "object"},
            },
            "required": ["reason"],
        },
        annotations={"side_effect_level": "none"},
    )


class SuspensionHook(LoopHook):
    """Turns a valid ``agent_await_resumption`` call into a suspended result."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory

    def before_dispatch(  # type: ignore[override]
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        # a plain method (see charter.agent.hooks) and a loop, not next(genexpr): this
        # runs on every turn
        for call in calls:
            if call.name == TOOL:
                break
        else:
            return None
        try:
            request = agent_await_resumption(
                call.arguments.get("reason", ""), call.arguments.get("conditions")
            )
        except AgentOptionError:
            return None  # dispatched: the handler reports the error to the model
        from .directives import answer_messages
        from .snapshots import SNAPSHOT_VERSION, default_dir
        from .workers import current_worker_id

        # a worker parks under its own id (its pool rewrites the snapshot with all it knows)
        worker_id = current_worker_id(run.cfg.session_id) or f"worker_{uuid.uuid4().hex[:12]}"
        target = (self.directory or default_dir()) / f"{worker_id}.json"
        # Every call of the parking turn is answered, in the snapshot as in the transcript:
        # a resumed loop resends this history, and the providers refuse a tool call
        # without its result (OpenAI: 400; Anthropic: tool_use without tool_result).
        answers = {call.id: f"Suspended: {request['reason']}. You are resumed from here."}
        native = bool(run.messages and run.messages[-1].get("tool_calls"))
        answered = answer_messages(calls, native, "[not executed: the loop suspended]", answers)
        messages = [m for m in [*run.messages, *answered] if _jsonable(m)]
        snapshot = {
            "version": SNAPSHOT_VERSION,
            "id": worker_id,
            "name": run.cfg.policy_label,
            "status": "suspended",
            "reason": request["reason"],
            "initiator": "self",
            "conditions": request["conditions"],
            "task": run.prompt,
            "pending_task": None,
            "system": run.system,
            "policy": combined_policy(current_stack()).to_dict(),
            "token_budget": None,
            "returns": None,
            "transcript_mode": "inherit",
            "session_id": run.cfg.session_id,
            "summary": None,
            "messages": messages,
            "options": {},
            "cycles": 1,
            "suspended_at": time.time(),
            "trace_context": telemetry.inject(),
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(snapshot, indent=2, default=str))
        tmp.replace(target)
        run.extras.update(
            {
                "handle": {"id": worker_id, "snapshot_path": str(target), "mode": "agent_loop"},
                "reason": request["reason"],
                "initiator": "self",
                "conditions": request["conditions"],
                "iterations_completed": iteration,
            }
        )
        run.event("agent_suspended", iteration=iteration, reason=request["reason"])
        return {
            "action": "stop",
            "stop_reason": "await_resumption",
            "status": "suspended",
            "answers": {
                **{c.id: "[not executed: the loop suspended]" for c in calls},
                **answers,
            },
        }


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False
