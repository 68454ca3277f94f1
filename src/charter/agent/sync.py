"""``asyncio.run`` for the synchronous twins, without a cost that grows with the result."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, returning its value through a box instead of the task.

    On its way out ``asyncio.Runner.run`` asks ``signal.getsignal`` whether its SIGINT
    handler is still installed; that tries ``signal.Handlers(handler)`` and formats the
    failure with the handler's ``repr``, a ``functools.partial`` naming the main task, whose
    ``repr`` includes the task's result. For an agent result that is the whole transcript:
    tens of milliseconds after a 2,000-turn loop, paid after the work was done. A task whose
    result is ``None`` costs nothing to format.
    """
    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]
