"""The sandbox profile: what the kernel must enforce, built from the effective policy.

:func:`build_profile` reads a :class:`charter.policy.Policy` (usually the intersection of
the active stack, :func:`charter.policy.combined_policy`) and a workspace, and produces a
:class:`SandboxProfile`: plain data that each mechanism (bubblewrap today) turns into its
own arguments. Nothing here decides a tool call; the profile only restates the policy's
path and network rules in the terms a kernel can enforce.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

from charter.policy import SENSITIVE_PATHS, Policy, Rules, expand_pattern, make_context
from charter.policy.paths import PathContext, PathMatcher, compile_paths

#: How many directory entries :func:`build_profile` inspects for denied names
#: (``*.pem``, ``.env*``, ...) before giving up on the rest of the tree.
SCAN_LIMIT = 20_000


#: Files and directories that programs run later, outside any sandbox (shell start-up
#: files, git hooks and config, editor and agent settings): read-only to a sandboxed
#: shell even inside writable roots, so it cannot plant what runs unsandboxed next time.
#: The names follow @anthropic-ai/sandbox-runtime's mandatory deny list.
PROTECTED_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".zshrc",
        ".zprofile",
        ".profile",
        ".gitconfig",
        ".gitmodules",
        ".ripgreprc",
        ".mcp.json",
    }
)
PROTECTED_DIRS = frozenset({".vscode", ".idea"})
#: ``(parent, name)`` pairs: ``.git/hooks``, ``.git/config``, ``.claude/commands`` ...
PROTECTED_NESTED = frozenset(
    {(".git", "hooks"), (".git", "config"), (".claude", "commands"), (".claude", "agents")}
)


class NetworkMode(StrEnum):
    """How the sandbox reaches the network."""

    #: Same network as charter (the policy does not restrict the network).
    HOST = "host"
    #: No network at all: a fresh namespace with only a loopback device.
    NONE = "none"
    #: A fresh namespace whose only way out is charter's allow-listing proxy.
    PROXY = "proxy"


@dataclass(frozen=True, slots=True)
class SandboxProfile:
    """What a sandboxed process may see, write and reach.

    ``writable`` are absolute, symlink-free roots mounted read-write (``("/",)`` when the
    policy does not restrict writes); everything else is read-only. ``readable`` are the
    roots the policy lets be read (``("/",)`` when it does not restrict reads); only
    Landlock can enforce them (a mount cannot hide all but a few trees cheaply), on top
    of the system directories programs need. ``masked_dirs`` and
    ``masked_files`` exist on the host and are replaced by an empty read-only directory
    or an empty file. ``readonly`` are paths under a writable root that stay read-only
    (write-only denies). ``scan_complete`` is False when the tree holding the workspace
    was too large to inspect for denied file names within :data:`SCAN_LIMIT` entries.
    """

    workspace: str
    home: str
    writable: tuple[str, ...]
    readable: tuple[str, ...] = ("/",)
    masked_dirs: tuple[str, ...] = ()
    masked_files: tuple[str, ...] = ()
    readonly: tuple[str, ...] = ()
    network: NetworkMode = NetworkMode.HOST
    scan_complete: bool = True
    reasons: tuple[str, ...] = field(default=(), compare=False)

    @property
    def masked(self) -> tuple[str, ...]:
        """Every masked path (directories first)."""
        return self.masked_dirs + self.masked_files


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


_Expand = Callable[[str, PathContext], tuple[str, str]]


def _roots(patterns: Iterable[str], ctx: PathContext, expand: _Expand) -> set[str]:
    return {expand(p, ctx)[0] for p in patterns}


def _meet(a: set[str], b: set[str]) -> set[str]:
    # A path must fall under a root of every allow group: keep the deeper of each nested pair.
    out: set[str] = set()
    for x in a:
        for y in b:
            if _under(x, y):
                out.add(x)
            elif _under(y, x):
                out.add(y)
    return out


def _minimal(roots: Iterable[str]) -> tuple[str, ...]:
    kept: list[str] = []
    for root in sorted(set(roots), key=lambda r: (r.count("/"), r)):
        if not any(_under(root, k) for k in kept):
            kept.append(root)
    return tuple(sorted(kept))


def writable_roots(
    rules: Rules, ctx: PathContext, *, expand: _Expand = expand_pattern
) -> tuple[str, ...]:
    """Roots an allow-list conjunction permits (``("/",)`` when unrestricted): for the
    ``write`` rules, the writable roots; for the ``read`` rules, the readable ones."""
    if not rules.allow:
        return ("/",)
    groups = [_roots(group, ctx, expand) for group in rules.allow]
    roots = groups[0]
    for group in groups[1:]:
        roots = _meet(roots, group)
    return _minimal(r for r in roots if os.path.isdir(r) or os.path.exists(r))


def _deny_patterns(policy: Policy, access: str) -> tuple[str, ...]:
    own = policy.paths.for_access(access).deny
    sensitive = tuple(p for name in policy.sensitive_denied() for p in SENSITIVE_PATHS[name])
    return tuple(dict.fromkeys(own + sensitive))


def build_profile(
    policy: Policy,
    workspace: str | None = None,
    *,
    home: str | None = None,
    scan_roots: Sequence[str] = (),
    extra_writable: Sequence[str] = (),
) -> SandboxProfile:
    """The :class:`SandboxProfile` enforcing ``policy``'s path and network rules.

    ``extra_writable`` are roots the caller needs writable beyond what the policy allows
    (a launched CLI's own state directory, say); they are the caller's decision, made
    visible in the profile, and denied paths under them stay masked.

    Denied literal paths (``./secrets/**``, ``~/.ssh``) are masked directly; denied file
    names (``*.pem``, ``.env*``) are found by walking the workspace, the writable roots
    under it and ``scan_roots`` (bounded by :data:`SCAN_LIMIT`), with the policy's own
    path matcher, case-insensitively as the policy matches denies.
    """
    ctx = make_context(workspace, home)
    # Each pattern resolved once per build (read and write rules share most of them; the
    # resolution touches the filesystem, so it is not kept across builds).
    expand = lru_cache(maxsize=None)(expand_pattern)
    read_deny = _deny_patterns(policy, "read")
    write_deny = _deny_patterns(policy, "write")
    writable = writable_roots(policy.paths.for_access("write"), ctx, expand=expand)
    readable = writable_roots(policy.paths.for_access("read"), ctx, expand=expand)
    extra = [os.path.realpath(os.path.expanduser(p)) for p in extra_writable]
    extra = [p for p in extra if os.path.exists(p)]
    if writable != ("/",) and extra:
        writable = _minimal([*writable, *extra])
    if readable != ("/",) and extra:  # what the caller needs written, it needs read
        readable = _minimal([*readable, *extra])
    reasons: list[str] = []

    masked: set[str] = set()
    readonly: set[str] = set()
    for pattern in read_deny:
        prefix, rest = expand(pattern, ctx)
        if not rest and prefix != "/" and os.path.lexists(prefix):
            masked.add(prefix)
    for pattern in write_deny:
        prefix, rest = expand(pattern, ctx)
        if not rest and prefix != "/" and os.path.lexists(prefix) and prefix not in masked:
            readonly.add(prefix)

    read_matcher = compile_paths(read_deny, ctx, True) if read_deny else None
    write_matcher = compile_paths(write_deny, ctx, True) if write_deny else None
    roots = [ctx.workspace, *scan_roots, *(w for w in writable if w != "/")]
    complete = _scan(_minimal(roots), read_matcher, write_matcher, masked, readonly)
    if not complete:
        reasons.append(
            f"more than {SCAN_LIMIT} entries under the workspace: denied file names beyond "
            "that were not masked"
        )

    if any(_under(ctx.home, w) for w in writable):  # elsewhere the mounts are read-only
        for name in PROTECTED_FILES | PROTECTED_DIRS:
            in_home = os.path.join(ctx.home, name)
            if os.path.lexists(in_home):
                readonly.add(in_home)

    masked_paths = _minimal(masked)
    dirs = tuple(p for p in masked_paths if os.path.isdir(p) and not os.path.islink(p))
    files = tuple(p for p in masked_paths if p not in dirs)
    ro = tuple(p for p in _minimal(readonly) if not any(_under(p, m) for m in masked_paths))
    return SandboxProfile(
        workspace=ctx.workspace,
        home=ctx.home,
        writable=writable,
        readable=readable,
        masked_dirs=dirs,
        masked_files=files,
        readonly=ro,
        network=network_mode(policy.network),
        scan_complete=complete,
        reasons=tuple(reasons),
    )


def network_mode(rules: Rules) -> NetworkMode:
    """``HOST`` when unrestricted, ``NONE`` when nothing may pass, else ``PROXY``."""
    if not rules.restricted:
        return NetworkMode.HOST
    if rules.allows_nothing:
        return NetworkMode.NONE
    return NetworkMode.PROXY


@dataclass(frozen=True, slots=True)
class _Listing:
    """What one directory contributed to a profile, valid while its mtime is unchanged."""

    mtime_ns: int
    entries: int
    masked: tuple[str, ...]
    readonly: tuple[str, ...]
    subdirs: tuple[str, ...]


# (directory, read matcher, write matcher) -> listing. Matchers come from the policy's
# compile cache, so identical policies share entries. A directory modified within the last
# second is always listed again: mtimes are coarser than the time between two calls.
_LISTINGS: OrderedDict[tuple[str, object, object], _Listing] = OrderedDict()
_LISTINGS_LOCK = threading.Lock()
_LISTINGS_MAX = 50_000
_FRESH_NS = 1_000_000_000


def _list_directory(
    directory: str,
    read_matcher: PathMatcher | None,
    write_matcher: PathMatcher | None,
) -> _Listing | None:
    try:
        mtime = os.stat(directory).st_mtime_ns
    except OSError:
        return None
    key = (directory, read_matcher, write_matcher)
    with _LISTINGS_LOCK:
        cached = _LISTINGS.get(key)
        if cached is not None and cached.mtime_ns == mtime:
            _LISTINGS.move_to_end(key)
            return cached
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None
    masked: list[str] = []
    readonly: list[str] = []
    subdirs: list[str] = []
    for entry in entries:
        path = entry.path
        name = entry.name
        if (
            name in PROTECTED_FILES
            or name in PROTECTED_DIRS
            or ((os.path.basename(directory), name) in PROTECTED_NESTED)
        ):
            readonly.append(path)
        if read_matcher is not None and read_matcher.first_match(path) is not None:
            masked.append(path)
            continue
        if write_matcher is not None and write_matcher.first_match(path) is not None:
            readonly.append(path)
            continue
        if entry.is_symlink():
            # A link to a denied file elsewhere: mask what it points to.
            target = os.path.realpath(path)
            if read_matcher is not None and read_matcher.first_match(target) is not None:
                masked.append(target)
            elif write_matcher is not None and write_matcher.first_match(target) is not None:
                readonly.append(target)
        elif entry.is_dir(follow_symlinks=False):
            subdirs.append(path)
    listing = _Listing(mtime, len(entries), tuple(masked), tuple(readonly), tuple(subdirs))
    if time.time_ns() - mtime > _FRESH_NS:
        with _LISTINGS_LOCK:
            _LISTINGS[key] = listing
            if len(_LISTINGS) > _LISTINGS_MAX:
                _LISTINGS.popitem(last=False)
    return listing


def _scan(
    roots: Sequence[str],
    read_matcher: PathMatcher | None,
    write_matcher: PathMatcher | None,
    masked: set[str],
    readonly: set[str],
) -> bool:
    seen = 0
    stack = [r for r in roots if os.path.isdir(r)]
    while stack:
        listing = _list_directory(stack.pop(), read_matcher, write_matcher)
        if listing is None:
            continue
        seen += listing.entries
        if seen > SCAN_LIMIT:
            return False
        masked.update(listing.masked)
        readonly.update(listing.readonly)
        stack.extend(listing.subdirs)
    return True
