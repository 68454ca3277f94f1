"""``os.path.realpath`` with fewer system calls in the common case, and the same answer.

The policy resolves every path argument on every call (a resolution cached across calls
would keep following a symlink the agent has since swapped), so the resolver is on the
hot path of each tool call. ``os.path.realpath`` is pure Python and ``lstat``\\ s every
component. On Linux this module asks the kernel instead: it opens the path with
``O_PATH`` (following symlinks, reading nothing) and reads the descriptor's path back from
``/proc/self/fd``; when a tail of the path does not exist yet, it does the same for the
longest existing prefix and ``lstat``\\ s the first missing component.

The kernel's answer is used only when it equals the path written without ``.`` and
empty components, that is when no symlink was followed: then ``os.path.realpath`` would
return exactly that string too. Everything else (a symlink anywhere on the way, ``..``,
a dangling link, a loop, a non-directory in the middle, a missing ``/proc``, a platform
without ``O_PATH``, any error) is answered by ``os.path.realpath`` itself, so the result
is always the reference's (``tests/policy/test_realpath.py`` checks this over random
trees of symlinks).
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
    if not _O_PATH:
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
    parts = [p for p in path.split("/") if p and p != "."]
    if ".." in parts:  # realpath folds ``..`` after resolving what precedes it
        return os.path.realpath(path)
    plain = "/" + "/".join(parts)
    try:
        real = _kernel_path(plain)
    except FileNotFoundError:
        return _missing_tail(path, plain, parts)
    except (OSError, ValueError):
        return os.path.realpath(path)
    return plain if real == plain else os.path.realpath(path)


def _missing_tail(path: str, plain: str, parts: list[str]) -> str:
    """``plain`` (absolute, no ``.``/``..``) does not exist: find what does."""
    # the longest prefix that exists (``access`` raises nothing, so a miss is cheap); the
    # kernel's name for it and an ``lstat`` below it decide, so a wrong guess here can
    # only send the path to the fallback
    depth = len(parts) - 1
    while depth and not os.access("/" + "/".join(parts[:depth]), os.F_OK):
        depth -= 1
    prefix = "/" + "/".join(parts[:depth])
    try:
        if _kernel_path(prefix) != prefix:
            return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.realpath(path)
    try:
        os.lstat(prefix.rstrip("/") + "/" + parts[depth])
    except OSError:
        # ``realpath`` takes an entry it cannot ``lstat`` for a non-link and so is every
        # entry below it: the rest is kept as written
        return plain
    except ValueError:
        pass
    return os.path.realpath(path)  # it exists after all: a dangling link, or a race


__all__ = ["ENABLED", "realpath"]
