"""A git worktree per worker that writes: created at spawn, removed when it is closed.

The worker runs with its worktree as ``workspace``, so the loop's workspace frame
confines its paths there: it cannot write to the parent's checkout. The branch stays
after removal (its commits are the worker's output for the parent to merge).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .options import AgentOptionError

CLEANUP = ("remove", "preserve")
_WHERE = "spawn_agent.execution"


@dataclass(frozen=True)
class Worktree:
    repo: str
    branch: str
    path: str
    cleanup: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "branch": self.branch,
            "path": self.path,
            "cleanup": self.cleanup,
        }


def parse_execution(value: Any) -> dict[str, Any] | None:
    """Validate ``execution: {worktree: {repo?, branch, cleanup?}}``."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - {"worktree"}:
        raise AgentOptionError(_WHERE, "expected {worktree: {repo, branch, cleanup}}")
    spec = value.get("worktree")
    if not isinstance(spec, Mapping) or set(spec) - {"repo", "branch", "cleanup"}:
        raise AgentOptionError(f"{_WHERE}.worktree", "expected {repo, branch, cleanup}")
    branch = spec.get("branch")
    if not isinstance(branch, str) or not branch.strip():
        raise AgentOptionError(f"{_WHERE}.worktree.branch", "expected a branch name")
    cleanup = spec.get("cleanup", "remove")
    if cleanup not in CLEANUP:
        raise AgentOptionError(
            f"{_WHERE}.worktree.cleanup", f"expected one of {', '.join(CLEANUP)}"
        )
    return {"repo": str(spec.get("repo") or "."), "branch": branch, "cleanup": cleanup}


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, timeout=60, check=False)


def create_worktree(spec: Mapping[str, Any], worker_id: str) -> Worktree:
    top = _git("-C", os.path.realpath(spec["repo"]), "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise AgentOptionError(
            f"{_WHERE}.worktree.repo",
            f"{spec['repo']}: not a git repository ({top.stderr.strip()})",
        )
    repo = top.stdout.strip()
    path = os.path.join(tempfile.mkdtemp(prefix=f"charter-{worker_id}-"), "worktree")
    added = _git("-C", repo, "worktree", "add", "-b", spec["branch"], path)
    if added.returncode != 0:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        raise AgentOptionError(f"{_WHERE}.worktree.branch", added.stderr.strip())
    return Worktree(repo, spec["branch"], os.path.realpath(path), spec["cleanup"])


def remove_worktree(tree: Worktree) -> None:
    """Remove the worktree (``cleanup: "remove"``); the branch is kept."""
    if tree.cleanup != "remove":
        return
    _git("-C", tree.repo, "worktree", "remove", "--force", tree.path)
    shutil.rmtree(os.path.dirname(tree.path), ignore_errors=True)
    _git("-C", tree.repo, "worktree", "prune")
