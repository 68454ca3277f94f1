"""After a turn: its outcomes recorded, ``post_turn_callback`` (and its
``next_options``), the loop-state snapshot and ``loop_control`` / the default adaptive
iteration budget (seed 001)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .dispatch import ToolOutcome
from .options import AgentOptionError
from .providers.base import ToolCallRequest
from .textmode import render_tool_result

#: What ``post_turn_callback`` may set for the next iteration through ``next_options``.
NEXT_OPTIONS = ("llm_options", "tool_choice", "temperature", "max_tokens", "model", "nudge")


def record_outcomes(run: Any, iteration: int, outcomes: list[ToolOutcome], native: bool) -> None:
    """A turn's outcomes into the run: tool stats, ``tool_call_audit`` events, the last
    iteration each tool was called in (``run.last_used``, for narrowing), and the results
    the model sees next (tool messages, or one user message in text mode)."""
    ts = run.tool_stats
    calls, successful, rejected = ts.calls, ts.successful, ts.rejected
    events = run.events
    last_used = run.last_used
    for o in outcomes:
        name = o.name
        if name not in calls:
            calls.append(name)
        names = successful if o.status == "ok" else rejected
        if name not in names:
            names.append(name)
        events.append(o.audit_event(iteration))
        last_used[name.lower()] = iteration  # turns only move forward
    messages = run.messages
    if native:
        for o in outcomes:
            messages.append(
                {"role": "tool", "tool_call_id": o.call_id, "name": o.name, "content": o.rendered}
            )
    else:
        blocks = [render_tool_result(o.name, o.call_id, o.rendered) for o in outcomes]
        messages.append({"role": "user", "content": "\n".join(blocks)})


def post_turn(
    run: Any,
    iteration: int,
    text: str,
    shown: str,
    calls: list[ToolCallRequest],
    outcomes: list[ToolOutcome],
) -> tuple[bool, str | None]:
    ts = run.tool_stats
    info = {
        "session_id": run.cfg.session_id,
        "iteration": iteration,
        "has_tool_calls": bool(calls),
        "dispatch": [o.to_dict() for o in outcomes] if outcomes else None,
        "tool_results": [o.summary() for o in outcomes],
        "tool_count": len(outcomes),
        "successful_tool_names": [o.name for o in outcomes if o.ok],
        "rejected_tool_names": [o.name for o in outcomes if not o.ok],
        "session_successful_tools": list(ts.successful),
        "session_rejected_tools": list(ts.rejected),
        "text": text,
        "visible_text": shown,
    }
    callback = run.cfg.post_turn
    assert callback is not None
    out = callback(info)
    if isinstance(out, str):
        if out:
            run.messages.append({"role": "user", "content": out})
        return False, None
    if isinstance(out, bool):
        return out, "post_turn_stop" if out else None
    if isinstance(out, Mapping):
        if out.get("message"):
            run.messages.append({"role": "user", "content": str(out["message"])})
        if out.get("llm_options"):
            run.next_llm_options.update(dict(out["llm_options"]))
        merge_next_options(run, out.get("next_options") or {})
        if out.get("stop"):
            return True, str(out.get("stop_reason") or "post_turn_stop")
    return False, None


def merge_next_options(run: Any, next_options: Mapping[str, Any]) -> None:
    """``post_turn_callback``'s ``next_options``: options for the next iteration only."""
    unknown = set(next_options) - set(NEXT_OPTIONS)
    if unknown:
        raise AgentOptionError(
            "post_turn_callback",
            f"next_options: unsupported key(s) {', '.join(sorted(unknown))} "
            f"(per-iteration options: {', '.join(NEXT_OPTIONS)})",
        )
    if next_options.get("llm_options"):
        run.next_llm_options.update(dict(next_options["llm_options"]))
    for key in ("tool_choice", "temperature", "max_tokens"):
        if next_options.get(key) is not None:
            run.next_llm_options[key] = next_options[key]
    if next_options.get("model"):
        run.next_model = str(next_options["model"])
    if next_options.get("nudge"):
        run.next_nudge = str(next_options["nudge"])


def loop_state(
    run: Any,
    iteration: int,
    limit: int,
    extensions: int,
    outcomes: list[ToolOutcome],
    shown: str,
    proposed: bool,
    vetoed: bool,
    verdict: dict[str, Any] | None,
    fallback_used: bool,
) -> dict[str, Any]:
    ts = run.tool_stats
    successful = [o.name for o in outcomes if o.ok]
    missing = run.required_missing()
    changed = bool(outcomes) or bool(shown)
    return {
        "iteration": iteration,
        "budget": {
            "current_limit": limit,
            "max": run.cfg.budget.max,
            "remaining": limit - iteration,
            "extension_count": extensions,
        },
        "turn": {
            "tool_call_count": len(outcomes),
            "successful_tool_names": successful,
            "rejected_tool_names": [o.name for o in outcomes if not o.ok],
            "text_chars": len(shown),
            "native_fallback_used": fallback_used,
        },
        "session": {
            "successful_tool_names": list(ts.successful),
            "rejected_tool_names": list(ts.rejected),
            "required_tools_satisfied": not missing,
            "required_tools_missing": missing,
        },
        "completion": {
            "proposed": proposed,
            "vetoed": vetoed,
            "verdict": None if verdict is None else verdict.get("verdict"),
            "feedback": None if verdict is None else verdict.get("feedback"),
        },
        "progress": {
            "changed": changed,
            "summary": "completion gate vetoed"
            if vetoed
            else f"executed {len(outcomes)} tool call(s)"
            if outcomes
            else "wrote text"
            if shown
            else "no progress",
        },
    }


def loop_control(run: Any, iteration: int, limit: int, extensions: int, *args: Any) -> Any:
    cfg = run.cfg
    if cfg.loop_control is None and cfg.budget.mode != "adaptive":
        return None
    state = loop_state(run, iteration, limit, extensions, *args)
    if cfg.loop_control is not None:
        command = cfg.loop_control(state)
        if command is not None and not isinstance(command, Mapping):
            raise AgentOptionError("loop_control", "must return None or a command dict")
        return command
    # The default adaptive policy: extend only at the cap edge, on evidence.
    if state["budget"]["remaining"] > 0:
        return None
    if state["completion"]["vetoed"]:
        return {"action": "extend", "reason": "completion gate vetoed"}
    if not state["session"]["required_tools_satisfied"]:
        return {"action": "extend", "reason": "require_successful_tools unsatisfied"}
    if state["turn"]["tool_call_count"] > 0:
        return {"action": "extend", "reason": "recent turn made progress"}
    return None
