"""What a sandboxed CLI could plant that runs after it, held read-only for the launch.

A launched CLI writes the workspace; the files on :data:`charter.policy.RUNS_LATER`
(``.git/config`` and hooks, ``.claude/``, ``.gemini/``, ``.vscode/``, ``.mcp.json``...)
are run later by the user's next unsandboxed ``git``, ``claude`` or editor. Inside the
sandbox each one under a writable root is bound read-only, unless the persona allows it
by name (every write-allow group names it or a path inside it:
:func:`charter.policy.runs_later.named_by`, as for the shell and the write tools). The coding CLIs'
project configs and git's hooks directory that do not exist yet are held too: an empty
placeholder file is made on the host for the run (journaled, so a launch killed with -9 has
it removed by the next launch, :func:`charter.launch.swap.placeholder`) and bound
read-only, so the CLI cannot create them either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Missing names held for the run (an empty read-only file stands in for each, so neither
#: a file nor a directory can be made there): the coding CLIs' project configs, the
#: editor's, and git's hooks directory.
PLACEHOLDERS = (
    ".claude",
    ".gemini",
    ".codex",
    ".opencode",
    ".vscode",
    ".git/hooks",
    ".mcp.json",
    "opencode.json",
    "opencode.jsonc",
)


@dataclass(frozen=True)
class Held:
    """The paths to bind read-only: ``existing`` as they are, ``missing`` once a
    placeholder exists."""

    existing: tuple[str, ...]
    missing: tuple[str, ...]


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def held_paths(
    roots: Iterable[str], writable: Sequence[str], allowed: Sequence[Sequence[str]]
) -> Held:
    """The files that run later directly in each of ``roots`` (the workspace, the
    repository root, HOME) that fall under a ``writable`` root, minus those the persona
    names: ``allowed`` holds each write-allow group's literal prefixes
    (:func:`allowed_by_name`), and every group must name the path
    (:func:`charter.policy.runs_later.named_by`, as the shell's sandbox and the write tools
    decide)."""
    from charter.policy.runs_later import RUNS_LATER, named_by

    names = [e.pattern for e in RUNS_LATER if "*" not in e.pattern]
    existing: list[str] = []
    missing: list[str] = []
    for root in dict.fromkeys(roots):
        for name in names:
            path = os.path.join(root, name)
            if not any(_under(path, w) for w in writable):
                continue
            if allowed and all(named_by(path, group, str) for group in allowed):
                continue
            if os.path.lexists(path):
                existing.append(path)
            elif not os.path.isdir(os.path.dirname(path)):
                continue  # .git/hooks without .git: nothing runs it
            elif name in PLACEHOLDERS:
                missing.append(path)
    return Held(tuple(existing), tuple(missing))


def allowed_by_name(
    write_allow: Iterable[Iterable[str]], workspace: str, home: str
) -> list[list[str]]:
    """Each write-allow group's patterns as their literal prefixes (absolute, resolved):
    what :func:`charter.policy.runs_later.named_by` compares a held path with."""
    from charter.policy import make_context
    from charter.policy.paths import split_pattern

    ctx = make_context(workspace, home)
    return [
        [os.path.realpath(split_pattern(pattern, ctx)[0]) for pattern in group]
        for group in write_allow
    ]
