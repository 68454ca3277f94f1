"""Errors raised for malformed policies."""

from __future__ import annotations

from dataclasses import dataclass

from charter.errors import CharterError


@dataclass(frozen=True, slots=True)
class PolicyIssue:
    """One problem with a policy document: where (a field path) and what was expected."""

    field_path: str
    message: str

    def __str__(self) -> str:
        return f"{self.field_path}: {self.message}" if self.field_path else self.message


class PolicyError(CharterError, ValueError):
    """A policy document is malformed; ``issues`` lists every problem found."""

    def __init__(self, issues: list[PolicyIssue], source: str | None = None) -> None:
        self.issues = list(issues)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        """One line per issue: ``file: field path: what was expected``."""
        prefix = f"{self.source}: " if self.source else ""
        return "\n".join(f"{prefix}{issue}" for issue in self.issues)

    def with_source(self, source: str) -> PolicyError:
        return PolicyError(self.issues, source)
