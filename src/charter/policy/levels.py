"""Side-effect levels: the ordered ceiling a policy frame may impose."""

from __future__ import annotations

from enum import IntEnum


class SideEffectLevel(IntEnum):
    """Ordered side-effect classes; a call is allowed only at or below a frame's ceiling."""

    NONE = 0
    READ_ONLY = 1
    WORKSPACE_WRITE = 2
    PROCESS_EXEC = 3
    NETWORK = 4

    @property
    def label(self) -> str:
        """The canonical lower-case name (``read_only``, ...)."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: object) -> SideEffectLevel:
        """Parse a canonical name (or an existing level); raise ``ValueError`` otherwise."""
        if isinstance(value, SideEffectLevel):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                pass
        raise ValueError(f"expected one of {', '.join(LEVEL_NAMES)}, got {value!r}")


LEVEL_NAMES: tuple[str, ...] = tuple(level.label for level in SideEffectLevel)

#: A tool that declares no side-effect level is treated as the most dangerous one.
UNANNOTATED_LEVEL = SideEffectLevel.NETWORK
