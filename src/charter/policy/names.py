"""Glob matching over canonical names (tools, MCP servers, skills, members, capabilities)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass


def canonical_name(name: str) -> str:
    """Canonical form of a tool / resource name: stripped and lower-case."""
    return name.strip().lower()


@dataclass(frozen=True, slots=True)
class NameMatcher:
    """A compiled list of name globs; one regex for the hot path, the list for reporting."""

    patterns: tuple[str, ...]
    _regex: re.Pattern[str] | None

    @classmethod
    def compile(cls, patterns: tuple[str, ...]) -> NameMatcher:
        if not patterns:
            return cls(patterns, None)
        if any(p == "*" for p in patterns):
            return cls(patterns, re.compile(r"(?s:.*)\Z"))
        body = "|".join(fnmatch.translate(p) for p in patterns)
        return cls(patterns, re.compile(f"(?:{body})"))

    def matches(self, name: str) -> bool:
        return self._regex is not None and self._regex.match(name) is not None

    def first_match(self, name: str) -> str | None:
        """The first pattern matching ``name`` (only called on the slow, reporting path)."""
        if not self.matches(name):
            return None
        for pattern in self.patterns:
            if fnmatch.fnmatchcase(name, pattern):
                return pattern
        return self.patterns[0]
