"""A sandbox compiled once and kept on disk while what it was built from still holds.

Every ``charter launch`` is a new process. Building its sandbox imports the policy engine,
compiles the policy's path patterns into regular expressions and walks the workspace for
denied file names, about 35 ms before the CLI can start; the result is the same as last
time unless the policy, the code or the filesystem changed. So the compiled sandbox (the
:class:`~charter.sandbox.profile.SandboxProfile`, the Landlock helper and the kernel's
Landlock ABI) is stored under ``<cache>/profiles`` with:

* a key of everything besides files it depends on: the policy (as JSON), workspace, home,
  extra writable roots, scan roots, the user, the boot (the ABI), ``CHARTER_LANDLOCK``,
  charter's version and the modification times of the code that builds it;
* the facts the build looked at (:class:`~charter.sandbox.profile.Facts`): each path it
  resolved (and what it resolved to), each path whose existence or type it tested, and the
  signature (mtime, ctime, inode, device) of every directory it scanned for denied names.

A stored sandbox is used only when the key matches and every fact still holds, so a new
``.env`` anywhere under the workspace (its directory's entries change), a changed symlink
or a new literal denied path rebuilds it. A directory whose timestamps moved (the
launch's own placeholder file came and went) or changed in the last two seconds before the
build is listed again and compared entry by entry. ``CHARTER_SANDBOX_CACHE=0`` turns the
cache off.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .profile import Facts, SandboxProfile, facts_hold

CACHE_VERSION = 2
CACHE_ENV = "CHARTER_SANDBOX_CACHE"
#: Stored sandboxes kept (the oldest are removed beyond this).
KEEP = 256
_BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True, slots=True)
class Compiled:
    """A profile with its Landlock helper (``helper`` or why none: ``helper_reason``) and
    the kernel's Landlock ABI; ``cached`` when it came from disk."""

    profile: SandboxProfile
    helper: str | None
    helper_reason: str | None
    abi: int | None
    cached: bool = False


def enabled(env: Mapping[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(CACHE_ENV, "1")
    return value.strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> str:
    from .landlock import helper_cache_dir

    return os.path.join(helper_cache_dir(), "profiles")


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "-"


def _code_stamp() -> list[int]:
    """Newest mtime of the code that builds a sandbox (an edited charter rebuilds)."""
    here = os.path.dirname(os.path.abspath(__file__))
    newest = []
    for folder in (here, os.path.join(os.path.dirname(here), "policy")):
        stamp = 0
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.endswith((".py", ".c")):
                        stamp = max(stamp, entry.stat().st_mtime_ns)
        except OSError:
            pass
        newest.append(stamp)
    return newest


def _key(
    policy: Mapping[str, Any],
    workspace: str,
    home: str,
    extra_writable: Sequence[str],
    scan_roots: Sequence[str],
    landlock: bool,
) -> str:
    from charter import __version__

    return json.dumps(
        [
            CACHE_VERSION,
            __version__,
            _code_stamp(),
            policy,
            workspace,
            home,
            list(extra_writable),
            list(scan_roots),
            landlock,
            # where charter's own directories are (read-only inside: profile.charter_dirs)
            [os.environ.get(v, "") for v in ("XDG_CACHE_HOME", "XDG_STATE_HOME")],
            os.environ.get("CHARTER_CACHE_DIR", ""),
            os.environ.get("CHARTER_LANDLOCK", ""),
            os.geteuid(),
            _read(_BOOT_ID),
        ],
        sort_keys=True,
    )


def _path(key: str) -> str:
    raw = key.encode()
    return os.path.join(cache_dir(), f"{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}.json")


#: Stands for the caller's per-run directory (``volatile``) in keys and stored entries.
VOLATILE_TOKEN = "@@CHARTER_VOLATILE@@"


def lookup(key: str, volatile: str | None = None) -> Compiled | None:
    """The stored sandbox for ``key`` when every fact it was built from still holds
    (``volatile``, the per-run path the key holds as a token, filled back in)."""
    try:
        with open(_path(key), encoding="utf-8") as fh:
            raw = fh.read()
        entry = json.loads(raw.replace(VOLATILE_TOKEN, volatile) if volatile else raw)
    except (OSError, ValueError):
        return None
    try:
        if entry["key"] != (key.replace(VOLATILE_TOKEN, volatile) if volatile else key):
            return None
        if not facts_hold(entry["facts"]):
            return None
        helper = entry["helper"]
        if helper is not None and not os.access(helper, os.X_OK):
            return None  # the helper cache was cleared: build (and compile) again
        return Compiled(
            SandboxProfile.from_dict(entry["profile"]),
            helper,
            entry["helper_reason"],
            entry["abi"],
            cached=True,
        )
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def store(key: str, compiled: Compiled, facts: Facts, volatile: str | None = None) -> None:
    """Keep ``compiled`` with the ``facts`` it was built from (``volatile`` as a token)."""
    path = _path(key)
    entry = {
        "key": key,
        "facts": facts.items,
        "profile": compiled.profile.to_dict(),
        "helper": compiled.helper,
        "helper_reason": compiled.helper_reason,
        "abi": compiled.abi,
    }
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        body = json.dumps(entry)
        if volatile:
            body = body.replace(json.dumps(volatile)[1:-1], VOLATILE_TOKEN)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, path)
        _prune(os.path.dirname(path))
    except OSError:
        pass  # a cache that cannot be written is only slower


def _prune(directory: str) -> None:
    with os.scandir(directory) as it:
        entries = [e for e in it if e.name.endswith(".json")]
    if len(entries) <= KEEP:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for old in entries[: len(entries) - KEEP]:
        try:
            os.unlink(old.path)
        except OSError:
            continue


def compile_sandbox(
    policy: Mapping[str, Any],
    workspace: str,
    *,
    home: str,
    extra_writable: Sequence[str] = (),
    scan_roots: Sequence[str] = (),
    landlock: bool = True,
    volatile: str | None = None,
) -> Compiled:
    """The sandbox for ``policy`` (a :meth:`charter.policy.Policy.to_dict`) in
    ``workspace``: from disk when still valid, else built (and stored).

    ``volatile`` is a path that differs on every run (a launch's temp dir, among the
    ``extra_writable`` roots): stored as a token, so the next run's entry matches."""
    key = _key(policy, workspace, home, extra_writable, scan_roots, landlock)
    if volatile:
        key = key.replace(json.dumps(volatile)[1:-1], VOLATILE_TOKEN)
    use_cache = enabled()
    if use_cache:
        hit = lookup(key, volatile)
        if hit is not None:
            return hit
    from charter.policy import Frame, Policy, combined_policy

    from .availability import landlock_abi
    from .landlock import build_helper
    from .profile import build_profile

    facts = Facts()
    combined = combined_policy([Frame(Policy.from_dict(dict(policy)))])
    profile = build_profile(
        combined,
        workspace,
        home=home,
        scan_roots=scan_roots,
        extra_writable=extra_writable,
        facts=facts,
    )
    helper = build_helper() if landlock else None
    path = helper.path if helper is not None else None
    compiled = Compiled(
        profile,
        path,
        helper.reason if helper is not None else None,
        landlock_abi() if path else None,
    )
    if use_cache:
        store(key, compiled, facts, volatile)
    return compiled


__all__ = ["CACHE_ENV", "Compiled", "compile_sandbox", "enabled", "lookup", "store"]
