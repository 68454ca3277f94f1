"""Path targets and path patterns.

Both sides are resolved before matching: a target path is made absolute against the
workspace and passed through ``realpath`` (``..``, ``//``, ``/.`` and symlinks), and a
pattern's literal prefix is resolved the same way, so ``./src/../.env`` or a symlink
into ``~/.ssh`` is judged by where it really points.

Deny patterns match case-insensitively and allow patterns case-sensitively: on a
case-insensitive filesystem ``.ENV`` is ``.env``, and erring towards "denied" is the
fail-closed direction in both cases.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

_GLOB_CHARS = frozenset("*?[")

#: Paths that are denied whenever any policy is active, unless a frame lifts them by name.
SENSITIVE_PATHS: dict[str, tuple[str, ...]] = {
    "env_files": (".env*",),
    "ssh_keys": ("id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*"),
    "pem_files": ("*.pem",),
    "key_files": ("*.key",),
    "ssh_dir": ("~/.ssh",),
    "aws_dir": ("~/.aws",),
    "gnupg_dir": ("~/.gnupg",),
    "gcloud_dir": ("~/.config/gcloud",),
    "netrc": (".netrc", "_netrc"),
}


@dataclass(frozen=True, slots=True)
class PathContext:
    """Where relative paths and ``~`` point when a decision is made."""

    workspace: str
    home: str

    @classmethod
    def current(cls) -> PathContext:
        """The process's working directory and ``$HOME``."""
        return _context_for(os.getcwd(), os.path.expanduser("~"))


@lru_cache(maxsize=64)
def _context_for(workspace: str, home: str) -> PathContext:
    return PathContext(os.path.realpath(workspace), os.path.realpath(home))


def make_context(workspace: str | None = None, home: str | None = None) -> PathContext:
    """A :class:`PathContext`, defaulting to the working directory and ``$HOME``."""
    return _context_for(
        workspace if workspace is not None else os.getcwd(),
        home if home is not None else os.path.expanduser("~"),
    )


def resolve_target(value: str, ctx: PathContext) -> str:
    """Absolute, symlink-free form of a path argument."""
    if value == "~" or value.startswith("~/"):
        value = ctx.home + value[1:]
    elif not os.path.isabs(value):
        value = os.path.join(ctx.workspace, value)
    return os.path.realpath(value)


def _has_glob(part: str) -> bool:
    return any(ch in _GLOB_CHARS for ch in part)


def expand_pattern(pattern: str, ctx: PathContext) -> str:
    """Turn a policy path pattern into an absolute glob over resolved paths."""
    from wcmatch import glob as wglob

    text = pattern.strip()
    if text in ("*", "**"):
        return "/**"
    if text == "~" or text.startswith("~/"):
        text = ctx.home + text[1:]
    elif not text.startswith("/"):
        bare = text.rstrip("/")
        if "/" not in bare and bare not in (".", ".."):
            # A bare name such as ``*.pem`` or ``.netrc`` matches at any depth (gitignore style).
            return "/**/" + text.rstrip("/")
        text = os.path.join(ctx.workspace, text)
    parts = text.split("/")
    literal: list[str] = []
    rest: list[str] = []
    for part in parts:
        if rest or _has_glob(part):
            rest.append(part)
        else:
            literal.append(part)
    prefix = os.path.realpath("/".join(literal) or "/")
    glob_part = "/".join(p for p in rest if p not in ("", "."))
    escaped = wglob.escape(prefix)
    if not glob_part:
        return escaped
    return escaped.rstrip("/") + "/" + glob_part


@dataclass(frozen=True, slots=True)
class PathMatcher:
    """A compiled list of path patterns (each also covers everything below it)."""

    patterns: tuple[str, ...]
    _compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(repr=False)
    _combined: re.Pattern[str] | None = field(repr=False)

    def matches(self, target: str) -> bool:
        return self._combined is not None and self._combined.match(target) is not None

    def first_match(self, target: str) -> str | None:
        if not self.matches(target):
            return None
        for pattern, regex in self._compiled:
            if regex.match(target):
                return pattern
        return self.patterns[0]


@lru_cache(maxsize=1024)
def compile_paths(patterns: tuple[str, ...], ctx: PathContext, ignore_case: bool) -> PathMatcher:
    """Compile ``patterns`` for ``ctx``; cached because contexts and policies are immutable."""
    from wcmatch import glob as wglob

    flags = wglob.GLOBSTAR | wglob.DOTGLOB | wglob.FORCEUNIX
    if ignore_case:
        flags |= wglob.IGNORECASE
    compiled: list[tuple[str, re.Pattern[str]]] = []
    for pattern in patterns:
        expanded = expand_pattern(pattern, ctx)
        base = expanded.rstrip("/") or "/"
        below = "/**" if base == "/" else base + "/**"
        regexes, _ = wglob.translate([base, below], flags=flags)
        compiled.append((pattern, re.compile("|".join(f"(?:{r})" for r in regexes))))
    combined = (
        re.compile("|".join(f"(?:{regex.pattern})" for _, regex in compiled)) if compiled else None
    )
    return PathMatcher(patterns, tuple(compiled), combined)


def sensitive_matchers(ctx: PathContext) -> tuple[tuple[str, PathMatcher], ...]:
    """The default sensitive-path denies, compiled for ``ctx``."""
    return tuple(
        (name, compile_paths(patterns, ctx, True)) for name, patterns in SENSITIVE_PATHS.items()
    )
