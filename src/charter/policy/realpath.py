"""``os.path.realpath`` with fewer system calls in the common case, and the same answer.

The policy resolves every path argument on every call (a resolution cached across calls
would keep following a symlink the agent has since swapped), so the resolver is on the
hot path of each tool call. ``os.path.realpath`` is pure Python and ``lstat``\\ s every
component. On Linux this module asks the kernel instead: it opens the path with
``O_PATH`` (following symlinks, reading nothing) and reads the descriptor's path back from
``/proc/self/fd``. When the path cannot be reached (a tail that does not exist yet), it
does the same for the longest prefix that can, and checks that the next entry below it
does not exist even as a link; ``realpath`` keeps everything from there on as written.

The kernel's answer is used only when it equals the path written without ``.`` and
empty components, that is when no symlink was followed: then ``os.path.realpath`` would
return exactly that string too. Everything else (a symlink anywhere on the way, ``..``,
a dangling link, a loop, a missing ``/proc``, a platform without ``O_PATH``, any error)
is answered by ``os.path.realpath`` itself, so the result is always the reference's
(``tests/policy/test_realpath.py`` checks this over random trees of symlinks). Where a
probe only guesses (does this prefix exist?), it uses ``access``, which answers without
raising: an exception per call costs more than the system call it reports.
"""

from __future__ import annotations

import os

_O_PATH = getattr(os, "O_PATH", 0)
_FLAGS = _O_PATH | getattr(os, "O_CLOEXEC", 0)


def _kernel_path(path: str) -> str | None:
    """The kernel's name for what ``path`` opens (``None`` when it cannot say).

    Raises :class:`FileNotFoundError` when ``path`` does not exist.
    """
    fd = os.open(path, _FLAGS)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    finally:
        os.close(fd)


def _works() -> bool:
    if not _O_PATH or os.stat not in os.supports_dir_fd:
        return False
    try:
        return _kernel_path("/") == "/"
    except (OSError, ValueError):
        return False


ENABLED = _works()


def realpath(path: str) -> str:
    """``os.path.realpath(path)`` for an absolute ``str`` path (same result, always)."""
    if not ENABLED or not path.startswith("/"):
        return os.path.realpath(path)
    if "//" in path or "/." in path or path.endswith("/"):
        parts = [p for p in path.split("/") if p and p != "."]
        if ".." in parts:  # realpath folds ``..`` after resolving what precedes it
            return os.path.realpath(path)
        plain = "/" + "/".join(parts)
    else:  # written plainly already (the usual case): no components to drop
        plain = path
    if not _exists(plain):  # asked without an exception: a raised one costs more (cold)
        return _missing_tail(path, plain)
    try:
        real = _kernel_path(plain)
    except (OSError, ValueError):
        return os.path.realpath(path)
    return plain if real == plain else os.path.realpath(path)


def _missing_tail(path: str, plain: str) -> str:
    """``plain`` (absolute, no ``.``/``..`` or empty components) cannot be reached: find
    what can."""
    # the longest prefix that exists: ``access`` raises nothing, so a miss is cheap, and it
    # is only a guess (the kernel's name for the prefix and an ``lstat`` below it decide;
    # a wrong guess, even from an ``access`` a seccomp filter refuses, can only send the
    # path to the fallback). ``end`` is where the prefix stops (0: the root)
    end = len(plain)
    while True:
        end = plain.rfind("/", 0, end)
        if end <= 0 or _exists(plain[:end]):
            break
    end = max(end, 0)
    prefix = plain[:end] or "/"
    below = plain.find("/", end + 1)
    entry = plain[end + 1 :] if below < 0 else plain[end + 1 : below]
    try:
        fd = os.open(prefix, _FLAGS)
    except (OSError, ValueError):
        return os.path.realpath(path)
    try:
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return os.path.realpath(path)
        if real != prefix:
            return os.path.realpath(path)
        # the entry below the prefix must be absent even as a link (a dangling link fails
        # to open like a missing file, and realpath follows it). ``lstat`` is realpath's
        # own test: an entry it cannot lstat counts as no link, and so does every entry
        # below it, so the rest stays as written. ``_entry_exists`` answers what ``lstat``
        # would, without raising
        try:
            if not _entry_exists(entry, fd):
                return plain
        except ValueError:
            pass
    finally:
        os.close(fd)
    return os.path.realpath(path)  # it exists after all: a dangling link, or a race


_ACCESS_EFFECTIVE = os.access in os.supports_effective_ids
_ACCESS_AT = (
    _ACCESS_EFFECTIVE
    and os.access in os.supports_dir_fd
    and os.access in os.supports_follow_symlinks
)


def _entry_exists(name: str, dir_fd: int) -> bool:
    """Whether ``os.lstat(name, dir_fd=dir_fd)`` would succeed, asked without an exception.

    ``faccessat`` with ``AT_SYMLINK_NOFOLLOW`` (the entry itself, a link included) and
    ``AT_EACCESS`` (the effective ids ``lstat`` is checked with): existence needs what
    ``lstat`` needs, search permission on the directory and nothing on the entry.
    """
    if _ACCESS_AT:
        return os.access(name, os.F_OK, dir_fd=dir_fd, effective_ids=True, follow_symlinks=False)
    try:
        os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return False
    return True


def _exists(path: str) -> bool:
    """A guess (see :func:`_missing_tail`): whether ``path`` can be reached."""
    if _ACCESS_EFFECTIVE:
        return os.access(path, os.F_OK, effective_ids=True)
    return os.path.exists(path)


__all__ = ["ENABLED", "realpath"]
