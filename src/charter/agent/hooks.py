"""Named extension points of the agent loop.

A feature plugs into the loop as a :class:`LoopHook` (every hook a no-op by default);
the loop holds one :class:`CombinedHooks` and calls only these points:

- ``on_start(run, stack)``: tools assembled, frames pushed, before iteration 1
  (``stack`` is the run's exit stack: push frames or cleanups onto it);
- ``before_model_call(run, iteration)``: before each request is built (skills matching,
  tool-surface narrowing);
- ``before_dispatch(run, iteration, text, calls)``: the model proposed tool calls, none
  has run yet (step judges, stall judges); ``None`` lets them run, or a directive
  ``{action: "replace" | "retain" | "stop", feedback?, stop_reason?}``;
- ``after_dispatch(run, iteration, outcomes)``: the turn's calls were decided and the
  allowed ones ran; ``outcomes`` are :class:`~charter.agent.dispatch.ToolOutcome` s in
  emitted order, denied and refused calls included (audit sinks, streams, traces);
- ``on_idle(run, iteration)``: a turn would end the loop (daemons); ``None`` lets it
  end, ``{messages}`` continues it with those user messages, ``{status, stop_reason}``
  ends it with that status;
- ``on_finish(run)``: the loop stopped, before the result is assembled (write extras).

The two per-turn points may also be plain methods, answering at once what the coroutine
would (``None`` or a directive): the loop's own always-on hooks (reminders, self-parking,
narrowing) are, so that a turn creates no coroutine for them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, cast


class LoopHook:
    """One feature's view of the loop. Subclass and override the points you need."""

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        """Called once, after the loop's frames are pushed and its tools assembled."""

    async def before_model_call(self, run: Any, iteration: int) -> None:
        """Called before each model request of ``iteration`` (1-based) is built."""

    async def before_dispatch(
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        """Review a turn's tool calls before any runs (``None``: dispatch them)."""
        return None

    async def after_dispatch(self, run: Any, iteration: int, outcomes: list[Any]) -> None:
        """Called after a turn's tool calls were decided (and the allowed ones ran)."""

    async def on_idle(self, run: Any, iteration: int) -> dict[str, Any] | None:
        """A turn would end the loop: ``None`` to let it (see the module docstring)."""
        return None

    def on_finish(self, run: Any) -> None:
        """Called once when the loop stops, before the result is assembled."""


class CombinedHooks(LoopHook):
    """Several hooks called in order (``on_finish`` too: features are independent)."""

    def __init__(self, hooks: Sequence[LoopHook] = ()) -> None:
        self.hooks = list(hooks)
        self._seen: list[LoopHook] | None = None
        self._model_call: list[LoopHook] = []
        self._dispatch: list[LoopHook] = []
        self._after: list[LoopHook] = []

    def add(self, hook: LoopHook) -> None:
        self.hooks.append(hook)

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        for hook in self.hooks:
            await hook.on_start(run, stack)

    # The two per-turn points skip hooks that kept the no-op (most do): an awaited
    # coroutine per hook per turn is measurable in a long loop. Which hooks those are is
    # worked out again only when the list of hooks changed.

    def _per_turn(self) -> None:
        if self._seen == self.hooks:  # element by element, by identity first: cheap
            return
        self._seen = list(self.hooks)
        self._model_call = [h for h in self.hooks if _overrides(h, "before_model_call")]
        self._dispatch = [h for h in self.hooks if _overrides(h, "before_dispatch")]
        self._after = [h for h in self.hooks if _overrides(h, "after_dispatch")]

    async def before_model_call(self, run: Any, iteration: int) -> None:
        self._per_turn()
        for hook in self._model_call:
            pending = hook.before_model_call(run, iteration)
            if pending is not None:  # a plain method returns None (see _PLAIN_POINTS)
                await pending

    async def before_dispatch(
        self, run: Any, iteration: int, text: str, calls: list[Any]
    ) -> dict[str, Any] | None:
        self._per_turn()
        for hook in self._dispatch:
            directive: Any = hook.before_dispatch(run, iteration, text, calls)
            if directive is not None and not isinstance(directive, Mapping):
                directive = await directive  # a coroutine (a plain method answers at once)
            if directive is not None:
                return cast("dict[str, Any]", directive)  # the first objection decides
        return None

    def after_dispatch(  # type: ignore[override]
        self, run: Any, iteration: int, outcomes: list[Any]
    ) -> Awaitable[None] | None:
        """``None`` when no hook listens (no coroutine per turn), else an awaitable."""
        self._per_turn()
        if not self._after:
            return None
        return self._after_all(run, iteration, outcomes)

    async def _after_all(self, run: Any, iteration: int, outcomes: list[Any]) -> None:
        for hook in self._after:
            await hook.after_dispatch(run, iteration, outcomes)

    async def on_idle(self, run: Any, iteration: int) -> dict[str, Any] | None:
        for hook in self.hooks:
            outcome = await hook.on_idle(run, iteration)
            if outcome is not None:
                return outcome
        return None

    def on_finish(self, run: Any) -> None:
        for hook in self.hooks:
            hook.on_finish(run)


def _overrides(hook: LoopHook, point: str) -> bool:
    """Whether ``hook`` does something at ``point`` (its class or the instance replaced
    :class:`LoopHook`'s no-op)."""
    if point in getattr(hook, "__dict__", {}):
        return True
    return getattr(type(hook), point, None) is not getattr(LoopHook, point)
