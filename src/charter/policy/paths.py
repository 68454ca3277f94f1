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

import contextlib
import fnmatch
import os
import pwd
import re
from dataclasses import dataclass, field
from functools import lru_cache

from charter.errors import CharterError

from .realpath import realpath

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
    # contexts key the matcher caches and memos on every decision: hash them once
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.workspace, self.home)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[PathContext], tuple[str, str]]:
        # string hashes differ between processes: an unpickled context hashes afresh
        return (PathContext, (self.workspace, self.home))

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


class BadPathError(CharterError, ValueError):
    """A path argument that names no file (a NUL byte, for instance)."""


def resolve_target(value: str, ctx: PathContext) -> str:
    """Absolute, symlink-free form of a path argument: THE resolver.

    The policy decides on this value and the built-in handlers open it, so both always
    mean the same file. ``~`` and ``~/x`` are the context's home, ``~user/x`` that user's
    home (an unknown user stays literal, as in bash); environment variables are never
    expanded (by either side). Raises :class:`BadPathError` for a NUL byte.
    """
    if "\x00" in value:
        raise BadPathError(f"path {value!r} contains a NUL byte")
    if value.startswith("~"):
        user, sep, rest = value[1:].partition("/")
        if not user:
            value = ctx.home + sep + rest
        else:
            with contextlib.suppress(KeyError):
                value = pwd.getpwnam(user).pw_dir + sep + rest
    if not value.startswith("/"):
        value = ctx.workspace + "/" + value  # ctx.workspace is resolved: never empty
    return realpath(value)


def _has_glob(part: str) -> bool:
    return any(ch in _GLOB_CHARS for ch in part)


def expand_pattern(pattern: str, ctx: PathContext) -> tuple[str, str]:
    """Split a policy path pattern into a resolved absolute literal prefix and a glob rest.

    A bare name such as ``*.pem`` or ``.netrc`` matches at any depth (gitignore style):
    it comes back as ``("/", "**/NAME")``.
    """
    literal, rest = split_pattern(pattern, ctx)
    return (literal if literal == "/" else os.path.realpath(literal)), rest


def split_pattern(pattern: str, ctx: PathContext) -> tuple[str, str]:
    """:func:`expand_pattern` before the literal prefix is resolved: ``realpath`` of the
    first part is :func:`expand_pattern`'s prefix (callers that must tell later whether
    the resolution still holds, such as a cached sandbox profile, resolve it themselves)."""
    text = pattern.strip()
    if text in ("*", "**"):
        return "/", ""
    if text == "~" or text.startswith("~/"):
        text = ctx.home + text[1:]
    elif not text.startswith("/"):
        bare = text.rstrip("/")
        if "/" not in bare and bare not in (".", ".."):
            return "/", "**/" + bare
        text = os.path.join(ctx.workspace, text)
    parts = text.split("/")
    literal: list[str] = []
    rest: list[str] = []
    for part in parts:
        if rest or _has_glob(part):
            rest.append(part)
        else:
            literal.append(part)
    prefix = "/".join(literal) or "/"
    # ``dir/**`` covers ``dir`` itself too: listing a denied tree reveals its contents.
    while rest and rest[-1] in ("**", ""):
        rest.pop()
    return prefix, "/".join(p for p in rest if p not in ("", "."))


class PathMatcher:
    """A compiled list of path patterns (each also covers everything below it).

    Three shapes, fastest first: literal directories/files become a set looked up for
    each ancestor of the target; bare names (``*.pem``, ``.netrc``) are matched against
    each path component; anything else is a compiled glob.
    """

    __slots__ = ("_globs", "_ignore_case", "_literal", "_names", "_names_any", "patterns")

    def __init__(self, patterns: tuple[str, ...], ctx: PathContext, ignore_case: bool) -> None:
        from wcmatch import glob as wglob

        self.patterns = patterns
        self._ignore_case = ignore_case
        self._literal: dict[str, str] = {}
        self._names: list[tuple[str, re.Pattern[str]]] = []
        self._globs: list[tuple[str, re.Pattern[str]]] = []
        flags = wglob.GLOBSTAR | wglob.DOTGLOB | wglob.FORCEUNIX
        if ignore_case:
            flags |= wglob.IGNORECASE
        for pattern in patterns:
            prefix, rest = expand_pattern(pattern, ctx)
            if not rest:
                key = prefix.lower() if ignore_case else prefix
                self._literal.setdefault(key, pattern)
            elif prefix == "/" and rest.startswith("**/") and "/" not in rest[3:]:
                name = rest[3:]
                regex = fnmatch.translate(name.lower() if ignore_case else name)
                self._names.append((pattern, re.compile(regex)))
            else:
                base = wglob.escape(prefix).rstrip("/") + "/" + rest
                regexes, _ = wglob.translate([base, base + "/**"], flags=flags)
                self._globs.append((pattern, re.compile("|".join(f"(?:{r})" for r in regexes))))
        self._names_any = (
            re.compile("|".join(f"(?:{r.pattern})" for _, r in self._names))
            if self._names
            else None
        )

    def matches(self, target: str) -> bool:
        return self.first_match(target) is not None

    def all_matches(self, target: str) -> list[str]:
        """Every pattern that matches ``target`` (slower; for reporting and sensitive names)."""
        if self.first_match(target) is None:  # the common case, on the fast path
            return []
        key = target.lower() if self._ignore_case else target
        out: list[str] = []
        path = key
        while self._literal:
            hit = self._literal.get(path)
            if hit is not None:
                out.append(hit)
            if path == "/" or not path:
                break
            path = path.rsplit("/", 1)[0] or "/"
        parts = [part for part in key.split("/") if part]
        for pattern, regex in self._names:
            if any(regex.match(part) for part in parts):
                out.append(pattern)
        out.extend(pattern for pattern, regex in self._globs if regex.match(target))
        return out

    def first_match(self, target: str) -> str | None:
        """The pattern that matches ``target`` (an absolute, resolved path), if any."""
        key = target.lower() if self._ignore_case else target
        if self._literal:
            literal = self._literal
            path = key
            while True:
                hit = literal.get(path)
                if hit is not None:
                    return hit
                if path == "/" or not path:
                    break
                path = path.rsplit("/", 1)[0] or "/"
        if self._names_any is not None:
            for part in key.split("/"):
                if part and self._names_any.match(part):
                    for pattern, regex in self._names:
                        if regex.match(part):
                            return pattern
        for pattern, regex in self._globs:
            if regex.match(target):
                return pattern
        return None


@lru_cache(maxsize=1024)
def compile_paths(patterns: tuple[str, ...], ctx: PathContext, ignore_case: bool) -> PathMatcher:
    """Compile ``patterns`` for ``ctx``; cached because contexts and policies are immutable."""
    return PathMatcher(patterns, ctx, ignore_case)


_SENSITIVE_NAME_OF = {
    pattern: name for name, patterns in SENSITIVE_PATHS.items() for pattern in patterns
}


@lru_cache(maxsize=64)
def _sensitive_matcher(ctx: PathContext) -> PathMatcher:
    return PathMatcher(tuple(_SENSITIVE_NAME_OF), ctx, True)


def sensitive_names(target: str, ctx: PathContext) -> tuple[str, ...]:
    """Names of the default sensitive-path rules that ``target`` (resolved) falls under."""
    # a pure function of the context and the target: memoised, bounded. The context is
    # keyed by identity (its hash is a Python call) and held by the entry, so its id is
    # not reused while the entry exists
    hit = _SENSITIVE_SEEN.get((id(ctx), target))
    if hit is not None and hit[0] is ctx:
        return hit[1]
    hits = _sensitive_matcher(ctx).all_matches(target)
    names = tuple(dict.fromkeys(_SENSITIVE_NAME_OF[p] for p in hits))
    if len(_SENSITIVE_SEEN) >= 4096:
        _SENSITIVE_SEEN.clear()
    _SENSITIVE_SEEN[(id(ctx), target)] = (ctx, names)
    return names


_SENSITIVE_SEEN: dict[tuple[int, str], tuple[PathContext, tuple[str, ...]]] = {}
