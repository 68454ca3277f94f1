"""One trace per run: the loop's ``invoke_agent`` span (OpenTelemetry GenAI conventions).

Opened when the loop starts and current for its whole run, so every ``chat`` span (a
model call, :mod:`charter.agent.modelcall`) and ``execute_tool`` span (a tool call with
the policy decision as ``charter.policy.*`` attributes, :mod:`charter.agent.dispatch`) is
its child, and a sub-agent, member or worker started from a tool call is a child of that
call's span (they run in the caller's context). A worker resumed in another process
continues the trace through the ``trace_context`` its snapshot carries
(:func:`charter.agent.telemetry.inject` / :func:`~charter.agent.telemetry.attached`).
Without the ``otel`` extra or a tracer provider, nothing is built.
"""

from __future__ import annotations

import contextlib
from typing import Any

from . import telemetry
from .hooks import LoopHook


class TraceHook(LoopHook):
    """The run's ``invoke_agent`` span."""

    def __init__(self) -> None:
        self.span: Any = None

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        cfg = run.cfg
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": cfg.policy_label,
            "gen_ai.conversation.id": cfg.session_id,
            "gen_ai.provider.name": getattr(run.provider, "name", None),
            "gen_ai.request.model": cfg.model,
        }
        # entered on the run's exit stack: current until the loop's frames are popped
        self.span = stack.enter_context(
            telemetry.span(f"invoke_agent {cfg.policy_label}", attributes)
        )

    def on_finish(self, run: Any) -> None:
        telemetry.annotate(
            self.span,
            {
                "charter.agent.status": run.final_status,
                "gen_ai.usage.input_tokens": run.stats.input_tokens,
                "gen_ai.usage.output_tokens": run.stats.output_tokens,
                "charter.agent.iterations": run.stats.iterations,
            },
        )
        if run.final_status not in ("done", "suspended", "idle"):
            telemetry.error(self.span, run.final_status)


def trace_hook() -> TraceHook | None:
    """The hook, when spans are being recorded (one cheap check otherwise)."""
    return TraceHook() if telemetry.tracer() is not None else None
