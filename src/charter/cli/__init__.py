"""The ``charter`` command. Thin: parses arguments and calls the packages.

Sub-commands are loaded lazily so ``charter --help`` and ``--version`` import neither
SDKs nor pydantic nor rich; those two are answered without importing click at all
(:mod:`charter.cli._commands`). The click group is :data:`cli` (in ``_group``).
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a burst of imports and set-up.

    Start-up allocates many long-lived objects (modules, classes, the functions dataclasses
    generate) and the collector's passes over them free nothing: about 5 ms of a cold
    ``print-policy``. The previous state comes back on exit, so a command that goes on
    running (``serve``, the launched tool's wait) does so with the collector on.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    from ._commands import fast_answer

    args = sys.argv[1:] if argv is None else argv
    answer = fast_answer(list(args))
    if answer is not None:
        sys.stdout.write(answer)
        sys.stdout.flush()
        sys.exit(0)
    with gc_paused():  # click and the command tree
        from ._group import cli

    if argv is None:  # the console script: charter is the whole process
        from . import _common

        _common.OWNS_PROCESS = True
    return cli.main(args=argv, prog_name="charter")


def __getattr__(name: str) -> Any:
    if name == "cli":
        from ._group import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["cli", "gc_paused", "main"]
