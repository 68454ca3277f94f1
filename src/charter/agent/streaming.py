"""``agent_stream``: the loop as an async iterator of typed events.

``async for event in agent_stream(task, system, **options)`` yields, while the loop runs:

- :class:`TextDelta` / :class:`ReasoningDelta`: the model's text and reasoning as the
  provider streams them (OpenAI Chat Completions and Responses, Anthropic Messages use
  their streaming APIs whenever a stream is listening; the mock sends a turn's text as one
  delta);
- :class:`ToolCallStarted`: a tool call about to be decided and run (after every
  ``before_dispatch`` hook let the turn through);
- :class:`ToolCallFinished`: its outcome, with the policy decision; a call the policy or a
  gate refused is also a :class:`PermissionDenied`;
- :class:`LoopEvent`: every event the loop records (``PermissionEscalation`` /
  ``PermissionGrant`` / ``PermissionDeny`` for approvals, ``TranscriptCompacted``,
  ``JudgeDecision``, ``step_judge_decision``, ``loop_control_decision``, ...), by its
  ``kind``;
- :class:`FinalResult`: last, the same :class:`~charter.agent.AgentResult`
  ``agent_loop`` returns for these options.

Every event carries the ``session_id`` of the loop it came from: sub-agents and members
run in the caller's context, so their events arrive in the same stream, told apart by it.
A consumer that stops iterating cancels the loop.

The sink is a context variable: a loop, its providers and its hooks look it up once, and
with no stream listening nothing is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from .hooks import LoopHook
from .result import AgentResult


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    session_id: str | None = None
    type: str = "text_delta"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str
    session_id: str | None = None
    type: str = "reasoning_delta"


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    call_id: str
    name: str
    arguments: dict[str, Any]
    iteration: int
    session_id: str | None = None
    type: str = "tool_call_started"


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    call_id: str
    name: str
    status: str
    result: str
    decision: dict[str, Any] | None
    iteration: int
    session_id: str | None = None
    type: str = "tool_call_finished"


@dataclass(frozen=True, slots=True)
class PermissionDenied:
    call_id: str
    name: str
    reason: str | None
    decision: dict[str, Any] | None
    iteration: int
    session_id: str | None = None
    type: str = "permission_denied"


@dataclass(frozen=True, slots=True)
class LoopEvent:
    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    type: str = "loop_event"


@dataclass(frozen=True, slots=True)
class FinalResult:
    result: AgentResult
    session_id: str | None = None
    type: str = "final_result"


AgentEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallStarted
    | ToolCallFinished
    | PermissionDenied
    | LoopEvent
    | FinalResult
)
Sink = Callable[[AgentEvent], None]

_SINK: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("charter_stream", default=None)
_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "charter_stream_session", default=None
)


def current_sink() -> Sink | None:
    """The stream listening in this context (``None``: nobody; do not build events)."""
    return _SINK.get()


def emit_text(text: str) -> None:
    """A provider's text delta (no-op without a stream)."""
    sink = _SINK.get()
    if sink is not None and text:
        sink(TextDelta(text, _SESSION.get()))


def emit_reasoning(text: str) -> None:
    """A provider's reasoning delta (no-op without a stream)."""
    sink = _SINK.get()
    if sink is not None and text:
        sink(ReasoningDelta(text, _SESSION.get()))


class StreamHook(LoopHook):
    """Tells the stream about tool calls; installed last, so a call reported as started
    is one no earlier ``before_dispatch`` hook held back."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.session: str | None = None

    async def on_start(self, run: Any, stack: Any) -> None:
        self.session = run.cfg.session_id
        token = _SESSION.set(self.session)  # provider deltas name this loop
        stack.callback(_SESSION.reset, token)

    async def before_model_call(self, run: Any, iteration: int) -> None:
        # a turn boundary yields to the event loop: the consumer reads what the last turn
        # sent (and may stop the loop) even when nothing in the turn awaited (the mock)
        await asyncio.sleep(0)

    def before_dispatch(  # type: ignore[override]
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        for call in calls:
            self.sink(
                ToolCallStarted(call.id, call.name, dict(call.arguments), iteration, self.session)
            )
        return None

    async def after_dispatch(self, run: Any, iteration: int, outcomes: list[Any]) -> None:
        for o in outcomes:
            if o.status in ("permission_denied", "scope_violation"):
                self.sink(
                    PermissionDenied(
                        o.call_id, o.name, o.error, o.decision, iteration, self.session
                    )
                )
            self.sink(
                ToolCallFinished(
                    o.call_id, o.name, o.status, o.rendered, o.decision, iteration, self.session
                )
            )

    def loop_event(self, kind: str, data: dict[str, Any]) -> None:
        self.sink(LoopEvent(kind, dict(data), self.session))


def stream_hook() -> StreamHook | None:
    """The hook for a loop starting in this context, when a stream is listening."""
    sink = _SINK.get()
    return None if sink is None else StreamHook(sink)


async def agent_stream(
    prompt: str, system: str | None = None, **options: Any
) -> AsyncIterator[AgentEvent]:
    """Run ``agent_loop`` and yield its events as they happen, then its
    :class:`FinalResult` (see the module docstring)."""
    from .loop import agent_loop_async

    queue: asyncio.Queue[AgentEvent | BaseException] = asyncio.Queue()
    token = _SINK.set(queue.put_nowait)
    try:
        task = asyncio.ensure_future(agent_loop_async(prompt, system, **options))
    finally:
        _SINK.reset(token)  # the task copied the context: only it (and its children) emit

    def finished(done: asyncio.Future[AgentResult]) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            queue.put_nowait(error)
        else:
            result = done.result()
            queue.put_nowait(FinalResult(result, result.transcript.get("session_id")))

    task.add_done_callback(finished)
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if isinstance(item, FinalResult):
                return
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task  # the consumer stopped early: the loop stops too
