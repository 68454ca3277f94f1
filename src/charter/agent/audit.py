"""``audit_sink``: one record per attempted tool call, denied and refused ones included.

A sink placed as tool-caller middleware sees only the calls that reach the executor: a
call the policy stack denied, or an approval rule refused, never does, and those are the
calls an audit most needs. This hook reads the loop's outcomes after each turn instead.

With ``prefetch_next_turn`` (seed 001) the records are flushed in the background (a sync
sink on a worker thread) while the next planner turn starts; flushes keep their order,
and the loop drains them before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from .hooks import LoopHook


class AuditSinkHook(LoopHook):
    """Calls ``sink({tool, arguments, status, result, decision, call_id, iteration})``
    for every tool call the model made, in emitted order (an async sink is awaited)."""

    def __init__(self, sink: Callable[[dict[str, Any]], Any], *, background: bool = False):
        self.sink = sink
        self.background = background
        self._flush: asyncio.Task[None] | None = None

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        if run.cfg.options.get("prefetch_next_turn"):
            self.background = True
        if self.background:
            stack.push_async_callback(self.drain)  # before agent_loop returns

    async def after_dispatch(self, run: Any, iteration: int, outcomes: list[Any]) -> None:
        records = [
            {
                "tool": o.name,
                "arguments": dict(o.arguments),
                "status": o.status,
                "result": o.observation,
                "decision": o.decision,
                "call_id": o.call_id,
                "iteration": iteration,
            }
            for o in outcomes
        ]
        if not self.background:
            await self._write(records, threaded=False)
            return
        previous = self._flush

        async def flush() -> None:
            if previous is not None:
                await previous  # in order, turn after turn
            await self._write(records, threaded=True)

        self._flush = asyncio.ensure_future(flush())

    async def _write(self, records: list[dict[str, Any]], *, threaded: bool) -> None:
        for record in records:
            if inspect.iscoroutinefunction(self.sink):
                await self.sink(record)
            elif threaded:
                out = await asyncio.to_thread(self.sink, record)
                if inspect.isawaitable(out):
                    await out
            else:
                out = self.sink(record)
                if inspect.isawaitable(out):
                    await out

    async def drain(self) -> None:
        """Wait for the background flushes (the loop's end)."""
        if self._flush is not None:
            await self._flush
