"""``audit_sink``: one record per attempted tool call, denied and refused ones included.

A sink placed as tool-caller middleware sees only the calls that reach the executor: a
call the policy stack denied, or an approval rule refused, never does, and those are the
calls an audit most needs. This hook reads the loop's outcomes after each turn instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .hooks import LoopHook


class AuditSinkHook(LoopHook):
    """Calls ``sink({tool, arguments, status, result, decision, call_id, iteration})``
    for every tool call the model made, in emitted order (an async sink is awaited)."""

    def __init__(self, sink: Callable[[dict[str, Any]], Any]) -> None:
        self.sink = sink

    async def after_dispatch(self, run: Any, iteration: int, outcomes: list[Any]) -> None:
        for outcome in outcomes:
            record = {
                "tool": outcome.name,
                "arguments": dict(outcome.arguments),
                "status": outcome.status,
                "result": outcome.observation,
                "decision": outcome.decision,
                "call_id": outcome.call_id,
                "iteration": iteration,
            }
            out = self.sink(record)
            if inspect.isawaitable(out):
                await out
