"""The one list of files that run later (charter.policy.runs_later)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter.policy import RUNS_LATER, runs_later
from charter.policy.runs_later import _glob, named_by, runs_later_root


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


_NAMES = [".git", "config", "hooks", "modules", "a", ".vscode", "x.json", ".envrc", "commondir"]


@given(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=7))
def test_the_root_is_the_shallowest_listed_prefix(parts: list[str]) -> None:
    """runs_later_root (with its shortcut on last components) agrees with matching every
    prefix of the path against every entry, the reference reading of the list."""
    path = "/" + "/".join(parts)
    expected = None
    for end in range(1, len(parts) + 1):
        prefix = tuple(parts[:end])
        hit = next((e for e in RUNS_LATER if _glob(e.pattern, prefix)), None)
        if hit is not None:
            expected = ("/" + "/".join(prefix), hit)
            break
    assert runs_later_root(path) == expected
    assert (runs_later(path) is None) == (expected is None)


@pytest.mark.parametrize(
    ("root", "patterns", "named"),
    [
        ("/ws/.vscode", ["./.vscode/**"], True),
        ("/ws/.vscode", ["./.vscode/tasks.json"], True),
        ("/ws/.vscode", ["./**"], False),
        ("/ws/.git/config", ["./.git/**"], False),
        ("/ws/.git/config", ["./.git/config"], True),
        ("/ws/.git/config", ["*.json"], False),
    ],
)
def test_named_by_exact_name_only(root: str, patterns: list[str], named: bool) -> None:
    from charter.policy import expand_pattern, make_context

    ctx = make_context("/ws", "/home/u")
    assert named_by(root, patterns, lambda p: expand_pattern(p, ctx)[0]) is named
