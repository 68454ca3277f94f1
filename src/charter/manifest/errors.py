"""Validation errors: every problem is collected, never raised one at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ManifestError:
    """One problem: which file, which field (``personas[2].budget.daily_usd``) and what is wrong.

    ``line`` and ``column`` are 1-based and set when the position is known (always for
    TOML/JSON syntax errors, best effort for field errors).
    """

    manifest_path: str
    field_path: str
    message: str
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON form (``line``/``column`` are ``null`` when unknown)."""
        return {
            "manifest_path": self.manifest_path,
            "field_path": self.field_path,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }

    def __str__(self) -> str:
        where = self.manifest_path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return (
            f"{where}: {self.field_path}: {self.message}"
            if self.field_path
            else (f"{where}: {self.message}")
        )


@dataclass(frozen=True, slots=True)
class ManifestWarning:
    """Something valid that charter reads differently or cannot act on.

    ``kind`` groups warnings of one sort (``persona check`` prints each kind once, with a
    count): ``foreign_entry``, ``foreign_evals``, ``foreign_table``, ``trigger_not_received``.
    """

    kind: str
    manifest_path: str
    field_path: str
    message: str
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "manifest_path": self.manifest_path,
            "field_path": self.field_path,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }

    def __str__(self) -> str:
        return str(ManifestError(*self._fields()))

    def _fields(self) -> tuple[str, str, str, int | None, int | None]:
        return (self.manifest_path, self.field_path, self.message, self.line, self.column)


@dataclass(slots=True)
class Collector:
    """Accumulates :class:`ManifestError` for one source file.

    Validation code calls :meth:`add` with a field path and keeps going, so a user sees
    every problem of a manifest in one run.
    """

    manifest_path: str
    errors: list[ManifestError] = field(default_factory=list)
    warnings: list[ManifestWarning] = field(default_factory=list)

    def warn(self, kind: str, field_path: str, message: str) -> None:
        """Record a warning (never makes the manifest invalid)."""
        self.warnings.append(ManifestWarning(kind, self.manifest_path, field_path, message))

    def add(self, field_path: str, message: str) -> None:
        self.errors.append(ManifestError(self.manifest_path, field_path, message))

    def at(self, field_path: str, message: str, line: int | None, column: int | None) -> None:
        self.errors.append(ManifestError(self.manifest_path, field_path, message, line, column))

    def __bool__(self) -> bool:  # "if collector:" means "there are errors"
        return bool(self.errors)


def join(path: str, key: str | int) -> str:
    """Extend a field path: ``join("personas", 2) == "personas[2]"``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key
