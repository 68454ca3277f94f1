"""Id generation. Injected so runs are deterministic in tests.

The default derives ids from the event id the id is first recorded at (``run_42``):
unique per log, deterministic, and meaningful to someone reading the log.
"""

from __future__ import annotations

import random
from typing import Protocol


class IdFactory(Protocol):
    def new_id(self, prefix: str, event_id: int) -> str:
        """A fresh id for ``prefix`` (run, lease, budget, handoff) recorded at ``event_id``."""
        ...


class EventIds:
    """``<prefix>_<event_id>`` (the default)."""

    def new_id(self, prefix: str, event_id: int) -> str:
        return f"{prefix}_{event_id}"


class SeededIds:
    """Random-looking ids from a seeded generator (deterministic for a given seed)."""

    def __init__(self, seed: int | str = 0) -> None:
        self._rng = random.Random(seed)

    def new_id(self, prefix: str, event_id: int) -> str:
        return f"{prefix}_{self._rng.getrandbits(64):016x}"
