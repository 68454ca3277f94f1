"""Files that run later which a sandboxed call created: moved aside when it ends.

A read-only mount protects a file that exists; one that does not exist yet (a
workspace's ``.envrc``, ``.mcp.json`` or ``.vscode/``, a repository's ``.git/commondir``)
has nothing to mount over. :func:`take_planted` checks the places where a new one would
run (:attr:`~charter.sandbox.profile.SandboxProfile.absent_later`) after the sandboxed
process exits, and renames each one found to ``<name>.charter-refused`` (then
``-2``, ``-3``...) in the same directory, opened without following links, so that the
user's next plain command does not run it. The receipt says what was moved and why.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable

#: Suffix of a file that ran later, moved aside (not on the list: nothing runs it).
SUFFIX = ".charter-refused"


def take_planted(absent: Iterable[str]) -> list[tuple[str, str]]:
    """Move aside each of ``absent`` that exists now; ``(path, moved to)`` for each one
    (``moved to`` is empty when the rename failed: the caller must say so)."""
    moved: list[tuple[str, str]] = []
    for path in absent:
        parent, name = os.path.split(path)
        try:
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # no such directory (or a link planted in its place): nothing runs
        try:
            if not os.access(name, os.F_OK, dir_fd=fd, follow_symlinks=False):
                continue
            if name == ".git" and _is_dir(name, fd):
                continue  # a new repository: its config, hooks and commondir are checked
            target = _free_name(name, fd)
            try:
                os.rename(name, target, src_dir_fd=fd, dst_dir_fd=fd)
                moved.append((path, os.path.join(parent, target)))
            except OSError:
                moved.append((path, ""))
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
    return moved


def _is_dir(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _free_name(name: str, dir_fd: int) -> str:
    candidate = name + SUFFIX
    n = 1
    while os.access(candidate, os.F_OK, dir_fd=dir_fd, follow_symlinks=False):
        n += 1
        candidate = f"{name}{SUFFIX}-{n}"
    return candidate


def planted_notes(moved: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """Receipt notes for what :func:`take_planted` moved (or could not)."""
    notes = []
    for path, target in moved:
        if target:
            notes.append(
                f"the call created {path}, which runs later outside any sandbox: moved to "
                f"{target} (a policy allows it by naming it in paths.allow)"
            )
        else:
            notes.append(
                f"the call created {path}, which runs later outside any sandbox, and it "
                "could not be moved aside: remove it before running anything here"
            )
    return tuple(notes)
