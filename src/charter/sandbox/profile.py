"""The sandbox profile: what the kernel must enforce, built from the effective policy.

:func:`build_profile` reads a :class:`charter.policy.Policy` (usually the intersection of
the active stack, :func:`charter.policy.combined_policy`) and a workspace, and produces a
:class:`SandboxProfile`: plain data that each mechanism (bubblewrap today) turns into its
own arguments. Nothing here decides a tool call; the profile only restates the policy's
path and network rules in the terms a kernel can enforce.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by build_profile: a cached profile needs no policy engine
    from charter.policy import Policy, Rules
    from charter.policy.paths import PathContext, PathMatcher

#: How many directory entries :func:`build_profile` inspects for denied names
#: (``*.pem``, ``.env*``, ...) before giving up on the rest of the tree.
SCAN_LIMIT = 20_000


def charter_dirs(home: str, *, create: bool = True) -> list[str]:
    """charter's own cache and state directories (launch plans, compiled sandboxes, the
    Landlock helper, swap backups and journals, sessions): read-only to a sandboxed
    process even under a writable root, so it cannot rewrite what the next launch trusts
    (a cached plan without its sandbox, a profile without its masks). Created when
    missing (a directory made later inside the sandbox would not be protected)."""
    env = os.environ
    cache = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    state = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    dirs = [os.path.join(cache, "charter"), os.path.join(state, "charter")]
    if env.get("CHARTER_CACHE_DIR"):
        dirs.append(env["CHARTER_CACHE_DIR"])
    out = []
    for path in dirs:
        if not os.path.isabs(path):
            continue
        if create:
            with contextlib.suppress(OSError):
                os.makedirs(path, mode=0o700, exist_ok=True)
        out.append(path)
    return out


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
    (write-only denies, files that run later: :mod:`charter.policy.runs_later`).
    ``pinned`` are directories under a writable root that hold a masked or read-only
    path: each is mounted onto itself, so it cannot be renamed or removed (a mount point
    cannot), and renaming an ancestor never moves a denied path out of its rule's reach
    nor lets a fresh directory take a protected one's name. ``absent_later`` are files
    that run later which did not exist (so could not be mounted read-only), where a new
    one would run: one a call creates is moved aside after it
    (:mod:`charter.sandbox.planted`). ``scan_complete`` is False when the tree holding the workspace
    was too large to inspect for denied file names within :data:`SCAN_LIMIT` entries.
    """

    workspace: str
    home: str
    writable: tuple[str, ...]
    readable: tuple[str, ...] = ("/",)
    masked_dirs: tuple[str, ...] = ()
    masked_files: tuple[str, ...] = ()
    readonly: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    absent_later: tuple[str, ...] = ()
    network: NetworkMode = NetworkMode.HOST
    scan_complete: bool = True
    reasons: tuple[str, ...] = field(default=(), compare=False)

    @property
    def masked(self) -> tuple[str, ...]:
        """Every masked path (directories first)."""
        return self.masked_dirs + self.masked_files

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (for the on-disk cache of :mod:`charter.sandbox.compiled`)."""
        return {
            "workspace": self.workspace,
            "home": self.home,
            "writable": list(self.writable),
            "readable": list(self.readable),
            "masked_dirs": list(self.masked_dirs),
            "masked_files": list(self.masked_files),
            "readonly": list(self.readonly),
            "pinned": list(self.pinned),
            "absent_later": list(self.absent_later),
            "network": self.network.value,
            "scan_complete": self.scan_complete,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxProfile:
        """The profile :meth:`to_dict` wrote."""
        return cls(
            workspace=str(data["workspace"]),
            home=str(data["home"]),
            writable=tuple(data["writable"]),
            readable=tuple(data["readable"]),
            masked_dirs=tuple(data["masked_dirs"]),
            masked_files=tuple(data["masked_files"]),
            readonly=tuple(data["readonly"]),
            pinned=tuple(data["pinned"]),
            absent_later=tuple(data["absent_later"]),
            network=NetworkMode(data["network"]),
            scan_complete=bool(data["scan_complete"]),
            reasons=tuple(data["reasons"]),
        )


def path_kind(path: str) -> str:
    """What is at ``path``: ``-`` nothing, ``d`` a directory, ``f`` anything else, each
    prefixed with ``l`` for a symbolic link (``l-``: a dangling one)."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return "-"
    if not stat.S_ISLNK(st.st_mode):
        return "d" if stat.S_ISDIR(st.st_mode) else "f"
    try:
        target = os.stat(path)
    except (OSError, ValueError):
        return "l-"
    return "ld" if stat.S_ISDIR(target.st_mode) else "lf"


def dir_signature(st: os.stat_result) -> list[int]:
    """A directory's entries are unchanged while this is: an entry added, removed or
    renamed moves mtime and ctime, and ctime cannot be set back (``touch -d`` moves it)."""
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def entries_digest(entries: Iterable[os.DirEntry[str]]) -> str:
    """SHA-256 of a directory's entries (name and type: ``l`` link, ``d`` directory, ``f``
    anything else): what a listing for a profile depends on, besides link targets."""
    parts = []
    for entry in entries:
        if entry.is_symlink():
            kind = "l"
        elif entry.is_dir(follow_symlinks=False):
            kind = "d"
        else:
            kind = "f"
        parts.append(f"{entry.name}\0{kind}")
    return _sha256("\0\0".join(sorted(parts)).encode("utf-8", "surrogateescape"))


def _sha256(data: bytes) -> str:
    # hashlib loads OpenSSL (~3 ms, once per launch); the bare SHA-256 module is lighter
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            from hashlib import sha256  # type: ignore[no-redef,unused-ignore]
    return str(sha256(data).hexdigest())


def _listed_digest(path: str) -> str | None:
    try:
        with os.scandir(path) as it:
            return entries_digest(it)
    except OSError:
        return None


class Facts:
    """What one :func:`build_profile` looked at in the filesystem, so that a later process
    can tell whether the profile still holds (:mod:`charter.sandbox.compiled`).

    Each fact is JSON: ``["r", path, realpath]``, ``["k", path, kind]`` (:func:`path_kind`)
    or ``["d", directory, signature, digest]`` for a scanned directory: it holds while the
    :func:`dir_signature` is the same or, when it moved (a launch's placeholder file came
    and went), while the :func:`entries_digest` of a new listing is. A directory changed in
    the last two seconds has no signature (a later change could keep the same
    timestamps): it is always listed again.
    """

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[list[Any]] = []

    def real(self, path: str) -> str:
        resolved = os.path.realpath(path)
        self.items.append(["r", path, resolved])
        return resolved

    def kind(self, path: str) -> str:
        found = path_kind(path)
        self.items.append(["k", path, found])
        return found

    def directory(self, path: str, st: os.stat_result, digest: str) -> None:
        recent = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < 2_000_000_000
        self.items.append(["d", path, None if recent else dir_signature(st), digest])


def facts_hold(items: Iterable[Sequence[Any]]) -> bool:
    """Whether every fact a :class:`Facts` recorded is still true."""
    for item in items:
        tag, path, value = item[0], item[1], item[2]
        if tag == "r":
            if os.path.realpath(path) != value:
                return False
        elif tag == "k":
            if path_kind(path) != value:
                return False
        elif tag == "d":
            try:
                if value is not None and dir_signature(os.stat(path)) == value:
                    continue
            except OSError:
                return False
            if _listed_digest(path) != item[3]:
                return False
        else:
            return False
    return True


class _Looks:
    """Filesystem questions of one build, answered live and recorded when asked to."""

    __slots__ = ("facts",)

    def __init__(self, facts: Facts | None) -> None:
        self.facts = facts

    def real(self, path: str) -> str:
        if path == "/":
            return path
        return self.facts.real(path) if self.facts else os.path.realpath(path)

    def kind(self, path: str) -> str:
        return self.facts.kind(path) if self.facts else path_kind(path)

    def exists(self, path: str) -> bool:
        return self.kind(path) not in ("-", "l-")

    def lexists(self, path: str) -> bool:
        return self.kind(path) != "-"

    def isdir(self, path: str) -> bool:
        return self.kind(path) in ("d", "ld")

    def plain_dir(self, path: str) -> bool:  # a directory, not a link to one
        return self.kind(path) == "d"


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


_Expand = Callable[[str, "PathContext"], tuple[str, str]]


def mount_root(pattern: str, ctx: PathContext, expand: _Expand) -> tuple[str, bool]:
    """The directory a mount gives an allow ``pattern``, and whether the mount is exact
    (allows what the pattern allows, nothing more).

    A pattern's root is the deepest literal directory it can match (``./src/*.py``:
    ``./src``, inexact). A bare name or glob (``src``, ``*.md``) matches at any depth,
    which no mount can express: its root is the workspace, never a parent of it (only a
    pattern that says ``/``, ``*`` or ``**`` opens the whole filesystem), and inexact.
    """
    literal, rest = expand(pattern, ctx)
    if not rest:
        return literal, True
    text = pattern.strip()
    if literal == "/" and not text.startswith(("/", "~")):
        return ctx.workspace, False
    return literal, False


def inexact_patterns(rules: Rules, ctx: PathContext) -> list[str]:
    """The allow patterns of ``rules`` a mount cannot enforce exactly (:func:`mount_root`)."""
    from charter.policy.paths import split_pattern

    return [
        pattern
        for group in rules.allow
        for pattern in group
        if not mount_root(pattern, ctx, split_pattern)[1]
    ]


def _roots(patterns: Iterable[str], ctx: PathContext, expand: _Expand) -> set[str]:
    return {mount_root(p, ctx, expand)[0] for p in patterns}


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
    rules: Rules,
    ctx: PathContext,
    *,
    expand: _Expand | None = None,
    facts: Facts | None = None,
) -> tuple[str, ...]:
    """Roots an allow-list conjunction permits (``("/",)`` when unrestricted): for the
    ``write`` rules, the writable roots; for the ``read`` rules, the readable ones."""
    if not rules.allow:
        return ("/",)
    if expand is None:
        from charter.policy import expand_pattern

        expand = expand_pattern
    resolve: _Expand = expand
    look = _Looks(facts)
    groups = [_roots(group, ctx, resolve) for group in rules.allow]
    roots = groups[0]
    for group in groups[1:]:
        roots = _meet(roots, group)
    return _minimal(r for r in roots if look.exists(r))


def _deny_patterns(policy: Policy, access: str) -> tuple[str, ...]:
    from charter.policy import SENSITIVE_PATHS

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
    facts: Facts | None = None,
    later_allow: tuple[tuple[str, ...], ...] | None = None,
) -> SandboxProfile:
    """The :class:`SandboxProfile` enforcing ``policy``'s path and network rules.

    ``extra_writable`` are roots the caller needs writable beyond what the policy allows
    (a launched CLI's own state directory, say); they are the caller's decision, made
    visible in the profile, and denied paths under them stay masked.

    Denied literal paths (``./secrets/**``, ``~/.ssh``) are masked directly; denied file
    names (``*.pem``, ``.env*``) are found by walking the workspace, the writable roots
    under it and ``scan_roots`` (bounded by :data:`SCAN_LIMIT`), with the policy's own
    path matcher, case-insensitively as the policy matches denies.

    Files that run later (:mod:`charter.policy.runs_later`) are read-only unless each of
    ``later_allow`` (the write allow groups of the frames that judge them,
    :func:`charter.policy.runs_later.judging_allow`; default: ``policy``'s) names them.

    ``facts`` records everything the build looked at in the filesystem (to keep the
    profile on disk while those facts hold: :mod:`charter.sandbox.compiled`).
    """
    from functools import cache

    from charter.policy import make_context
    from charter.policy.paths import compile_paths, split_pattern

    look = _Looks(facts)
    ctx = make_context(workspace, home)
    if facts is not None:  # what the context resolved, as facts of this build
        facts.items.append(["r", workspace or os.getcwd(), ctx.workspace])
        facts.items.append(["r", home or os.path.expanduser("~"), ctx.home])

    # Each pattern resolved once per build (read and write rules share most of them; the
    # resolution touches the filesystem, so it is not kept across builds).
    @cache
    def expand(pattern: str, ctx: PathContext) -> tuple[str, str]:
        literal, rest = split_pattern(pattern, ctx)
        return look.real(literal), rest

    read_deny = _deny_patterns(policy, "read")
    write_deny = _deny_patterns(policy, "write")
    writable = writable_roots(policy.paths.for_access("write"), ctx, expand=expand, facts=facts)
    readable = writable_roots(policy.paths.for_access("read"), ctx, expand=expand, facts=facts)
    extra = [look.real(os.path.expanduser(p)) for p in extra_writable]
    extra = [p for p in extra if look.exists(p)]
    if writable != ("/",) and extra:
        writable = _minimal([*writable, *extra])
    if readable != ("/",) and extra:  # what the caller needs written, it needs read
        readable = _minimal([*readable, *extra])
    reasons: list[str] = []

    masked: set[str] = set()
    readonly: set[str] = set()
    for pattern in read_deny:
        prefix, rest = expand(pattern, ctx)
        if not rest and prefix != "/" and look.lexists(prefix):
            masked.add(prefix)
    for pattern in write_deny:
        prefix, rest = expand(pattern, ctx)
        if not rest and prefix != "/" and look.lexists(prefix) and prefix not in masked:
            readonly.add(prefix)

    read_matcher = compile_paths(read_deny, ctx, True) if read_deny else None
    write_matcher = compile_paths(write_deny, ctx, True) if write_deny else None
    roots = [ctx.workspace, *scan_roots, *(w for w in writable if w != "/")]
    later: set[str] = set()
    complete = _scan(_minimal(roots), read_matcher, write_matcher, masked, readonly, later, look)
    if not complete:
        reasons.append(
            f"more than {SCAN_LIMIT} entries under the workspace: denied file names beyond "
            "that were not masked"
        )

    from charter.policy.runs_later import entry_names, named_by, runs_later_root, written_runs_later

    if any(_under(ctx.home, w) for w in writable):  # elsewhere the mounts are read-only
        for name in sorted(entry_names()):
            in_home = os.path.join(ctx.home, name)
            if look.lexists(in_home):
                later.add(in_home)
    # Files that run later stay read-only unless the policy names them in its write
    # allow list (as charter.policy decides a write tool's call), or the caller made
    # their tree writable on purpose (a launched CLI's own state, ~/.claude).
    write_allow = policy.paths.for_access("write").allow if later_allow is None else later_allow
    own_trees = [e for e in extra if runs_later_root(e) is not None]

    def literal(pattern: str) -> str:
        return expand(pattern, ctx)[0]

    def exempt(path: str) -> bool:  # ``later`` and the candidates are files or listed
        hit = written_runs_later(path)
        if hit is None or any(_under(path, own) for own in own_trees):
            return True
        return bool(write_allow) and all(named_by(hit[0], g, literal) for g in write_allow)

    readonly.update(path for path in later if not exempt(path))
    # What is not there yet cannot be mounted read-only: the places where a new one
    # would run (the roots' own dotfiles, a repository's config, hooks and commondir)
    # are checked after each call (:func:`charter.sandbox.planted.take_planted`).
    bases = [
        b
        for b in dict.fromkeys((ctx.workspace, *writable, ctx.home))
        if b != "/" and any(_under(b, w) for w in writable) and look.plain_dir(b)
    ]
    gits = {os.path.join(b, ".git") for b in bases}
    gits.update(p[: p.index("/.git/") + 5] for p in later if "/.git/" in p)
    gits.update(os.path.dirname(p) for p in later if os.path.basename(p) in _GIT_LATER)
    candidates = [os.path.join(b, n) for b in bases for n in (*sorted(entry_names()), ".git")]
    candidates += [os.path.join(g, n) for g in sorted(gits) for n in _GIT_LATER]
    absent = tuple(c for c in dict.fromkeys(candidates) if not exempt(c) and not look.lexists(c))

    for own in map(look.real, charter_dirs(ctx.home)):
        if any(_under(own, w) for w in writable) and look.lexists(own):
            readonly.add(own)

    masked_paths = _minimal(_mask_targets(masked, look))
    dirs = tuple(p for p in masked_paths if look.plain_dir(p))
    files = tuple(p for p in masked_paths if p not in dirs)
    ro = tuple(p for p in _minimal(readonly) if not any(_under(p, m) for m in masked_paths))
    # Literal prefixes of glob denies (``./config/*/key.txt``: ``config``) are pinned
    # with the paths themselves: renaming one would move its matches out of the rule.
    anchors = [*masked_paths, *ro]
    for pattern in (*read_deny, *write_deny):
        prefix, rest = expand(pattern, ctx)
        if rest and prefix != "/" and look.plain_dir(prefix):
            anchors.append(os.path.join(prefix, "-"))
    return SandboxProfile(
        workspace=ctx.workspace,
        home=ctx.home,
        writable=writable,
        readable=readable,
        masked_dirs=dirs,
        masked_files=files,
        readonly=ro,
        pinned=_pins(anchors, writable),
        absent_later=absent,
        network=network_mode(policy.network),
        scan_complete=complete,
        reasons=tuple(reasons),
    )


#: What git reads in a repository directory that a call could create (the config and
#: hooks exist in any repository; ``commondir`` points git at another one's).
_GIT_LATER = ("config", "hooks", "commondir")


def _pins(paths: Iterable[str], writable: Sequence[str]) -> tuple[str, ...]:
    """The directories between each of ``paths`` and the writable root holding it
    (exclusive both ends), shallowest first: what :attr:`SandboxProfile.pinned` mounts
    onto itself. A writable root is a mount already; outside one nothing can be renamed."""
    pins: set[str] = set()
    for path in paths:
        bases = [w for w in writable if _under(path, w)]
        if not bases:
            continue
        base = max(bases, key=len)
        parent = os.path.dirname(path)
        while parent not in pins and parent != base and parent != "/" and _under(parent, base):
            pins.add(parent)
            parent = os.path.dirname(parent)
    return tuple(sorted(pins, key=lambda p: (p.count("/"), p)))


def _mask_targets(masked: set[str], look: _Looks) -> list[str]:
    """What a mask must cover: a denied path itself, or for a symlink what it points to
    (the mount lands there anyway). A dangling link hides nothing and cannot be mounted
    on (bwrap fails the whole call): it is left out, so a ``.env`` link to nothing, made
    by one call, does not break every later one (issue 29)."""
    out: list[str] = []
    for path in masked:
        kind = look.kind(path)
        if kind == "l-":
            continue
        out.append(look.real(path) if kind.startswith("l") else path)
    return out


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

    signature: tuple[int, ...]
    entries: int
    masked: tuple[str, ...]
    readonly: tuple[str, ...]
    later: tuple[str, ...]  # files that run later (charter.policy.runs_later)
    subdirs: tuple[str, ...]
    links: tuple[tuple[str, str], ...]  # (symlink, its resolved target), to record as facts
    digest: str  # entries_digest, when the listing was made for a build keeping facts
    path: str = ""


# (directory, read matcher, write matcher) -> listing. Matchers come from the policy's
# compile cache, so identical policies share entries. A directory modified within the last
# second is always listed again: mtimes are coarser than the time between two calls. The
# signature holds the ctime too: a sandboxed shell can set a directory's mtime back after
# a denied file appears in it, never its ctime.
_LISTINGS: OrderedDict[tuple[str, object, object], _Listing] = OrderedDict()
_LISTINGS_LOCK = threading.Lock()
_LISTINGS_MAX = 50_000
_FRESH_NS = 1_000_000_000


def _list_directory(
    directory: str,
    read_matcher: PathMatcher | None,
    write_matcher: PathMatcher | None,
    look: _Looks,
) -> _Listing | None:
    try:
        st = os.stat(directory)
    except OSError:
        return None
    signature = tuple(dir_signature(st))
    key = (directory, read_matcher, write_matcher)
    with _LISTINGS_LOCK:
        cached = _LISTINGS.get(key)
        if cached is not None and cached.signature == signature:
            _LISTINGS.move_to_end(key)
            _record(cached, look, st)
            return cached
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:
        return None
    from charter.policy.runs_later import GIT_DIR_ENTRIES, runs_later, tail_names

    tails = tail_names()
    # a repository directory whatever its name (``--separate-git-dir``, a bare ``x.git``)
    names = {entry.name for entry in entries}
    repository = "HEAD" in names and "objects" in names
    masked: list[str] = []
    readonly: list[str] = []
    later: list[str] = []
    subdirs: list[str] = []
    links: list[tuple[str, str]] = []
    for entry in entries:
        path = entry.path
        name = entry.name
        if name in tails and (
            runs_later(path) is not None or (name in GIT_DIR_ENTRIES and repository)
        ):
            later.append(path)
        elif name == ".git" and not entry.is_dir(follow_symlinks=False):
            later.append(path)  # a gitfile: it names the repository git uses
        if read_matcher is not None and read_matcher.first_match(path) is not None:
            masked.append(path)
            continue
        if write_matcher is not None and write_matcher.first_match(path) is not None:
            readonly.append(path)
            continue
        if entry.is_symlink():
            # A link to a denied file elsewhere: mask what it points to.
            target = os.path.realpath(path)
            links.append((path, target))
            if read_matcher is not None and read_matcher.first_match(target) is not None:
                masked.append(target)
            elif write_matcher is not None and write_matcher.first_match(target) is not None:
                readonly.append(target)
        elif entry.is_dir(follow_symlinks=False):
            subdirs.append(path)
    listing = _Listing(
        signature,
        len(entries),
        tuple(masked),
        tuple(readonly),
        tuple(later),
        tuple(subdirs),
        tuple(links),
        entries_digest(entries) if look.facts is not None else "",
        directory,
    )
    _record(listing, look, st)
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _FRESH_NS:
        with _LISTINGS_LOCK:
            _LISTINGS[key] = listing
            if len(_LISTINGS) > _LISTINGS_MAX:
                _LISTINGS.popitem(last=False)
    return listing


def _record(listing: _Listing, look: _Looks, st: os.stat_result) -> None:
    """Record what ``listing`` was computed from in the build's facts, if it keeps any."""
    facts = look.facts
    if facts is None:
        return
    digest = listing.digest
    if not digest:  # listed by a build that kept no facts: list again for the digest
        digest = _listed_digest(listing.path) or ""
    facts.directory(listing.path, st, digest)
    for link, target in listing.links:
        facts.items.append(["r", link, target])


def _scan(
    roots: Sequence[str],
    read_matcher: PathMatcher | None,
    write_matcher: PathMatcher | None,
    masked: set[str],
    readonly: set[str],
    later: set[str],
    look: _Looks,
) -> bool:
    seen = 0
    stack = [r for r in roots if look.isdir(r)]
    while stack:
        listing = _list_directory(stack.pop(), read_matcher, write_matcher, look)
        if listing is None:
            continue
        seen += listing.entries
        if seen > SCAN_LIMIT:
            return False
        masked.update(listing.masked)
        readonly.update(listing.readonly)
        later.update(listing.later)
        stack.extend(listing.subdirs)
    return True
