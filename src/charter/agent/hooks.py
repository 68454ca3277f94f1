"""Named extension points of the agent loop.

A feature plugs into the loop as a :class:`LoopHook` (every hook a no-op by default);
the loop holds one :class:`CombinedHooks` and calls only these points:

- ``on_start(run, stack)``: tools assembled, frames pushed, before iteration 1
  (``stack`` is the run's exit stack: push frames or cleanups onto it);
- ``before_model_call(run, iteration)``: before each request is built (skills matching,
  tool-surface narrowing);
- ``on_finish(run)``: the loop stopped, before the result is assembled (write extras).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any


class LoopHook:
    """One feature's view of the loop. Subclass and override the points you need."""

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        """Called once, after the loop's frames are pushed and its tools assembled."""

    async def before_model_call(self, run: Any, iteration: int) -> None:
        """Called before each model request of ``iteration`` (1-based) is built."""

    def on_finish(self, run: Any) -> None:
        """Called once when the loop stops, before the result is assembled."""


class CombinedHooks(LoopHook):
    """Several hooks called in order (``on_finish`` too: features are independent)."""

    def __init__(self, hooks: Sequence[LoopHook] = ()) -> None:
        self.hooks = list(hooks)

    def add(self, hook: LoopHook) -> None:
        self.hooks.append(hook)

    async def on_start(self, run: Any, stack: contextlib.AsyncExitStack) -> None:
        for hook in self.hooks:
            await hook.on_start(run, stack)

    async def before_model_call(self, run: Any, iteration: int) -> None:
        for hook in self.hooks:
            await hook.before_model_call(run, iteration)

    def on_finish(self, run: Any) -> None:
        for hook in self.hooks:
            hook.on_finish(run)
