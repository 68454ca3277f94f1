"""Stall diagnostics: adjacent repeated tool calls with identical arguments (seed 001).

``stall_check`` runs after a turn's calls were dispatched (warnings, feedback);
``would_stall`` answers, before dispatch, whether a turn's calls would fire a warning (the
stalled ``done_judge`` runs then).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .providers.base import ToolCallRequest


def digest(args: Mapping[str, Any]) -> str:
    blob = json.dumps(args, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def would_stall(run: Any, calls: list[ToolCallRequest]) -> bool:
    """Whether dispatching ``calls`` makes stall diagnostics fire (nothing is changed)."""
    stall = run.cfg.stall
    if stall is None:
        return False
    last, streak = run._last_sig, run._streak
    for call in calls:
        sig = call.name + ":" + digest(call.arguments)
        if sig == last and call.name not in stall["exempt"]:
            streak += 1
        else:
            streak, last = 1, sig
        if streak == stall["threshold"]:
            return True
    return False


def stall_check(run: Any, iteration: int, calls: list[ToolCallRequest]) -> None:
    stall = run.cfg.stall
    if stall is None:
        return
    for call in calls:
        sig = call.name + ":" + digest(call.arguments)
        if sig == run._last_sig and call.name not in stall["exempt"]:
            run._streak += 1
            run.repeated_calls += 1
        else:
            run._streak = 1
            run._last_sig = sig
        if run._streak == stall["threshold"]:
            warning: dict[str, Any] = {
                "iteration": iteration,
                "tool": call.name,
                "count": run._streak,
                "arguments_digest": digest(call.arguments),
            }
            if stall["include_arguments"]:
                warning["arguments"] = dict(call.arguments)
            run.stall_warnings.append(warning)
            run.event("stall_warning", **warning)
            if stall["inject_feedback"] and run.stall_feedback < stall["max_feedback"]:
                run.stall_feedback += 1
                run.messages.append(
                    {
                        "role": "user",
                        "content": f"You have called {call.name} {run._streak} times in a row "
                        "with identical arguments. Change approach or finish.",
                    }
                )
