"""The one list of files that run later (charter.policy.runs_later)."""

from __future__ import annotations

import pytest

from charter.policy import runs_later


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        "/repo/.git/config",
        "sub/.git/hooks/pre-commit",
        ".git/commondir",
        ".git/modules/lib/config",
        ".git/modules/a/modules/b/hooks/post-checkout",
        ".vscode/tasks.json",
        ".claude/settings.json",
        "pkg/.envrc",
        "/home/u/.bashrc",
        "a/../.npmrc",
        ".mcp.json",
    ],
)
def test_listed(path: str) -> None:
    entry = runs_later(path)
    assert entry is not None and entry.why


@pytest.mark.parametrize(
    "path",
    ["Makefile", "src/app.py", ".git/objects/ab/cdef", ".git/index", ".gitignore", "config"],
)
def test_not_listed(path: str) -> None:
    assert runs_later(path) is None
