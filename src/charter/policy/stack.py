"""The execution-policy stack, held in a ``ContextVar`` so threads and tasks each see their own."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .call import ToolCall
from .decision import Decision
from .engine import decide, decide_resource, decide_visibility
from .frame import Frame
from .model import Policy
from .paths import PathContext

_STACK: ContextVar[tuple[Frame, ...]] = ContextVar("charter_execution_policy_stack", default=())


def current_stack() -> tuple[Frame, ...]:
    """The active frames, bottom first."""
    return _STACK.get()


def _as_policy(policy: Policy | Mapping[str, Any]) -> Policy:
    return policy if isinstance(policy, Policy) else Policy.from_dict(policy)


@contextmanager
def with_execution_policy(
    policy: Policy | Mapping[str, Any],
    *,
    label: str | None = None,
    kind: str = "ambient",
    stage: str | None = None,
) -> Iterator[Frame]:
    """Push a frame for the duration of the block; it can only narrow what is allowed.

    The frame is popped on exit, exceptions included. Works the same inside threads
    (each starts from its own context) and asyncio tasks (which copy the context).
    """
    resolved = _as_policy(policy)
    frame = Frame(resolved, label or resolved.name or kind, kind, None, stage)
    token = _STACK.set((*_STACK.get(), frame))
    try:
        yield frame
    finally:
        _STACK.reset(token)


@contextmanager
def with_handoff_policy(
    policy: Policy | Mapping[str, Any],
    *,
    source_handoff: str,
    label: str | None = None,
) -> Iterator[Frame]:
    """*Replace* the stack with a handoff's ``policy_override`` for the handoff run.

    This is the one loosening operation the seeds define: the receiving run adopts the
    override as its top (and only) frame instead of merging it with its session policy.
    The frame records ``source_handoff`` so receipts can name it.
    """
    if not source_handoff:
        raise ValueError("a handoff policy override must name its source handoff")
    resolved = _as_policy(policy)
    frame = Frame(resolved, label or f"handoff:{source_handoff}", "handoff", source_handoff)
    token = _STACK.set((frame,))
    try:
        yield frame
    finally:
        _STACK.reset(token)


def decide_current(call: ToolCall, *, context: PathContext | None = None) -> Decision:
    """Decide ``call`` against the active stack."""
    return decide(call, _STACK.get(), context=context)


def decide_current_resource(dimension: str, name: str) -> Decision:
    """Decide a skill, delegation target, MCP server or capability against the active stack."""
    return decide_resource(dimension, name, _STACK.get())


def decide_current_visibility(call: ToolCall) -> Decision:
    """Whether ``call``'s tool may be offered to the model under the active stack."""
    return decide_visibility(call, _STACK.get())
