"""Files that run later: what a program executes without anyone reading it first.

One list, used by every enforcement point. A file on it is read-only to a sandboxed shell
(even inside a writable root), to the ``write``/``edit`` tools, and to a launched coding CLI,
unless a persona allows it by exact name: a call that could write one could plant what the
user's next unsandboxed command (``git status``, ``claude``, opening the editor, ``cd``)
runs on the host. Files a persona edits as ordinary work (a ``Makefile``, ``package.json``
scripts) are not on it: they run only when someone asks for them.

Each entry is a glob over the path *below any directory* (``.git/config`` matches the
repository's and a nested checkout's) with the reason it is here. :func:`runs_later`
matches a path and each of its ancestors, so a file under a listed directory is covered.
The names follow @anthropic-ai/sandbox-runtime's mandatory deny list, extended with what
git, direnv, npm and the four coding CLIs read at start-up.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .frame import Frame


@dataclass(frozen=True, slots=True)
class RunsLater:
    """One entry: ``pattern`` (a glob below any directory; ``*`` is one component, ``**``
    any number) and ``why`` a program runs it."""

    pattern: str
    why: str


RUNS_LATER: tuple[RunsLater, ...] = (
    # Shells read these at start-up.
    RunsLater(".bashrc", "bash runs it at start-up"),
    RunsLater(".bash_profile", "bash runs it for a login shell"),
    RunsLater(".bash_login", "bash runs it for a login shell"),
    RunsLater(".bash_logout", "bash runs it when a login shell exits"),
    RunsLater(".profile", "sh and bash run it for a login shell"),
    RunsLater(".zshrc", "zsh runs it at start-up"),
    RunsLater(".zshenv", "zsh runs it for every shell"),
    RunsLater(".zprofile", "zsh runs it for a login shell"),
    RunsLater(".zlogin", "zsh runs it for a login shell"),
    RunsLater(".envrc", "direnv runs it on entering the directory"),
    # git: configuration can name programs (core.fsmonitor, core.pager, aliases with !,
    # filter drivers, credential helpers) and hooks run on commit, checkout, merge, push.
    RunsLater(".gitconfig", "git reads it: core.fsmonitor, aliases and drivers run programs"),
    RunsLater(".git/config", "git reads it: core.fsmonitor, aliases and drivers run programs"),
    RunsLater(".git/hooks", "git runs them on commit, checkout, merge and push"),
    RunsLater(".git/commondir", "points git at another repository's config and hooks"),
    RunsLater(".git/modules/**/config", "a submodule's git config"),
    RunsLater(".git/modules/**/hooks", "a submodule's hooks"),
    RunsLater(".gitmodules", "submodule URLs and update commands run on `git submodule update`"),
    RunsLater(".hg/hgrc", "Mercurial reads it: hooks and extensions run programs"),
    RunsLater(".husky", "hooks run on commit when core.hooksPath names them (husky)"),
    # Package managers.
    RunsLater(".npmrc", "npm reads it: script-shell, node-options and registries"),
    RunsLater(".yarnrc", "yarn reads it: yarn-path runs a program"),
    RunsLater(".yarnrc.yml", "yarn reads it: yarnPath runs a program"),
    RunsLater(".ripgreprc", "ripgrep reads it: --pre runs a program"),
    # Editors and dev containers run tasks and commands from these on opening a folder.
    RunsLater(".vscode", "VS Code runs tasks and launch configurations from it"),
    RunsLater(".idea", "JetBrains IDEs run configurations from it"),
    RunsLater(".devcontainer", "dev containers run postCreateCommand and friends"),
    # Coding CLIs and agents: hooks, commands, agents and MCP servers are programs.
    RunsLater(".mcp.json", "MCP clients start the servers it names"),
    RunsLater(".claude", "Claude Code runs its hooks, commands, agents and MCP servers"),
    RunsLater(".gemini", "Gemini CLI runs its settings' MCP servers and tools"),
    RunsLater(".codex", "Codex reads its config: MCP servers and the sandbox mode"),
    RunsLater(".opencode", "OpenCode runs its plugins, commands and MCP servers"),
    RunsLater("opencode.json", "OpenCode's project config: MCP servers and permissions"),
    RunsLater("opencode.jsonc", "OpenCode's project config: MCP servers and permissions"),
)


def _glob(pattern: str, parts: tuple[str, ...]) -> bool:
    """Does ``parts`` (path components) end with a match of ``pattern``'s components?"""
    pat = tuple(pattern.split("/"))

    def match(p: int, i: int) -> bool:
        if p == len(pat):
            return i == len(parts)
        if pat[p] == "**":
            return any(match(p + 1, j) for j in range(i, len(parts) + 1))
        return i < len(parts) and (pat[p] == "*" or pat[p] == parts[i]) and match(p + 1, i + 1)

    return any(match(0, start) for start in range(len(parts)))


def runs_later(path: str) -> RunsLater | None:
    """The entry ``path`` falls under (the path itself or one of its ancestors), or None.

    ``path`` is POSIX, absolute or relative; it is normalised lexically (``a/../.git``
    is ``.git``), never resolved on disk: callers pass what they resolved."""
    hit = runs_later_root(path)
    return hit[1] if hit is not None else None


@lru_cache(maxsize=4096)
def runs_later_root(path: str) -> tuple[str, RunsLater] | None:
    """The shallowest path on the list at or above ``path`` (``/ws/.git/hooks`` for
    ``/ws/.git/hooks/pre-commit``) with its entry, or None. Normalised as
    :func:`runs_later`."""
    norm = posixpath.normpath(path)
    absolute = norm.startswith("/")
    parts = tuple(p for p in norm.split("/") if p not in ("", "."))
    tails = tail_names()
    if not any(p in tails for p in parts):  # a match ends at an entry's last component
        return None
    for end in range(1, len(parts) + 1):
        if parts[end - 1] not in tails:
            continue
        prefix = parts[:end]
        for entry in RUNS_LATER:
            if _glob(entry.pattern, prefix):
                root = "/".join(prefix)
                return ("/" + root if absolute else root), entry
    return None


#: A *file* named ``.git`` (a gitfile, ``gitdir: <path>``: worktrees and submodules) tells
#: git where the repository is, its config and hooks included. Not on :data:`RUNS_LATER`
#: (a ``.git`` directory stays writable: objects, refs, the index); a writer of files is
#: never writing a ``.git`` directory, so :func:`written_runs_later` counts it.
GITFILE = RunsLater(".git", "a .git file names the repository git uses, config and hooks too")


#: What git runs from any repository directory, whatever it is called (``--separate-git-dir``,
#: a bare ``x.git``, the main repository of a worktree): recognised by its ``HEAD`` file
#: and ``objects`` directory.
GIT_DIR_ENTRIES = {
    "config": RunsLater("<repository>/config", "git reads it: core.fsmonitor, aliases, drivers"),
    "hooks": RunsLater("<repository>/hooks", "git runs them on commit, checkout and push"),
    "commondir": RunsLater("<repository>/commondir", "points git at another repository"),
}


def is_git_dir(path: str) -> bool:
    """Whether ``path`` looks like a repository directory (``HEAD`` and ``objects/``)."""
    return os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(
        os.path.join(path, "objects")
    )


def written_runs_later(path: str) -> tuple[str, RunsLater] | None:
    """:func:`runs_later_root` for a *file* being written at ``path`` (absolute,
    resolved), also: a file named ``.git`` (:data:`GITFILE`) and a repository
    directory's ``config``, ``hooks/...`` or ``commondir`` whatever the directory is
    called (:data:`GIT_DIR_ENTRIES`; this looks at the filesystem)."""
    hit = runs_later_root(path)
    if hit is not None:
        return hit
    norm = posixpath.normpath(path)
    if posixpath.basename(norm) == ".git":
        return norm, GITFILE
    parts = norm.split("/")
    for i in range(len(parts) - 1, 0, -1):
        entry = GIT_DIR_ENTRIES.get(parts[i])
        if entry is not None and (i == len(parts) - 1 or parts[i] == "hooks"):
            parent = "/".join(parts[:i]) or "/"
            if is_git_dir(parent):
                return "/".join(parts[: i + 1]), entry
    return None


def named_by(root: str, patterns: Iterable[str], expand: Callable[[str], str]) -> bool:
    """Whether one of ``patterns`` names the listed path ``root`` by exact name: its
    literal prefix (``expand`` gives it, resolved) is ``root`` or lies below it.
    ``./.vscode/**`` or ``./.vscode/tasks.json`` name ``/ws/.vscode``; ``./**`` and
    ``./.git/**`` (for ``/ws/.git/config``) do not: a file that runs later is written
    only where a policy says so in as many words."""
    prefix = root.rstrip("/") + "/"
    for pattern in patterns:
        literal = expand(pattern)
        if literal == root or literal.startswith(prefix):
            return True
    return False


@lru_cache(maxsize=1)
def tail_names() -> frozenset[str]:
    """The last component of every entry (``config``, ``hooks``, ``.bashrc``...): a
    directory entry whose name is not here cannot itself be on the list. (Every entry
    ends in a literal name, never a glob.)"""
    return frozenset(e.pattern.rsplit("/", 1)[-1] for e in RUNS_LATER)


@lru_cache(maxsize=1)
def entry_names() -> frozenset[str]:
    """The single-component names on the list (``.bashrc``, ``.vscode``...): what a
    directory scan compares each entry's name with."""
    return frozenset(e.pattern for e in RUNS_LATER if "/" not in e.pattern)


def judges(frame: Frame, frames: Sequence[Frame]) -> bool:
    """Whether ``frame`` of the stack ``frames`` judges writes to files that run later:
    every frame that restricts writes, except the confinement frame ``agent_loop`` pushes
    (kind ``workspace``), which leaves them to the others (a persona naming
    ``./.vscode/**`` allows it) and judges them only when no other frame restricts
    writes. The engine (the ``write``/``edit`` tools) and the sandbox profile (the shell)
    apply the same rule."""
    if not frame.policy.paths.for_access("write").restricted:
        return False
    if frame.kind != "workspace":
        return True
    return not any(
        f is not frame and f.kind != "workspace" and f.policy.paths.for_access("write").restricted
        for f in frames
    )


def judging_allow(frames: Sequence[Frame]) -> tuple[tuple[str, ...], ...] | None:
    """The write allow groups of the frames that :func:`judges`, each of which must name
    a listed path for it to be writable; None when no frame judges them."""
    groups: list[tuple[str, ...]] = []
    judged = False
    for frame in frames:
        if judges(frame, frames):
            judged = True
            groups.extend(frame.policy.paths.for_access("write").allow)
    return tuple(groups) if judged else None
