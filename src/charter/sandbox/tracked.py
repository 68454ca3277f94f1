"""Denied paths that git tracks: readable through git's object store, whatever the masks.

A file the policy denies is masked in the sandbox, but if the repository tracks it, its
content is also in ``.git/objects``: ``git show HEAD:secrets/token.txt`` names it (and the
policy judges that), ``git log -p`` or ``git cat-file -p <blob id>`` do not. No mask can
cover a pack file, so charter says so: ``charter persona check``, ``charter doctor`` and
the ``bash`` tool's sandbox receipt report the denied paths a repository tracks under the
workspace.

``git ls-files`` runs with hooks and fsmonitor switched off; its answer is kept per
repository while ``.git/index`` is unchanged.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Sequence

from charter.policy import Frame, PathContext, Policy, combined_policy, make_context
from charter.policy.paths import sensitive_names

_LOCK = threading.Lock()
_LISTINGS: dict[str, tuple[tuple[int, int, int], tuple[str, ...]]] = {}
#: Verdicts per (top, index signature, policy, context): a call pays a few ``stat``s.
_VERDICTS: dict[tuple[object, ...], tuple[str, ...]] = {}
_GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


def _toplevel(workspace: str) -> str | None:
    """The work tree's top directory holding ``workspace`` (walking up to ``.git``)."""
    path = os.path.realpath(workspace)
    while True:
        if os.path.exists(os.path.join(path, ".git")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _index_signature(top: str) -> tuple[int, int, int] | None:
    """What changes with the index: its mtime, size and inode (``.git`` may be a file
    naming the git directory, as in a linked worktree or a submodule)."""
    dotgit = os.path.join(top, ".git")
    gitdir = dotgit
    if os.path.isfile(dotgit):
        try:
            with open(dotgit, encoding="utf-8") as handle:
                line = handle.readline().strip()
        except OSError:
            return None
        if not line.startswith("gitdir:"):
            return None
        gitdir = os.path.join(top, line.partition(":")[2].strip())
    try:
        st = os.stat(os.path.join(gitdir, "index"))
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def tracked_files(workspace: str) -> tuple[str, tuple[str, ...]] | None:
    """``(top, paths relative to top)`` of what the repository holding ``workspace``
    tracks under ``workspace`` (where the policy's rules point; a whole monorepo would
    make every check pay for it), or ``None`` outside a repository (or without git)."""
    where = os.path.realpath(workspace)
    top = _toplevel(where)
    if top is None:
        return None
    signature = _index_signature(top)
    with _LOCK:
        hit = _LISTINGS.get(where)
    if hit is not None and signature is not None and hit[0] == signature:
        return top, hit[1]
    try:
        proc = subprocess.run(
            ["git", *_GIT_SAFE, "-C", where, "ls-files", "-z", "--full-name"],
            capture_output=True,
            timeout=30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    files = tuple(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p)
    if signature is not None:
        with _LOCK:
            if len(_LISTINGS) > 64:
                _LISTINGS.clear()
            _LISTINGS[where] = (signature, files)
    return top, files


def tracked_denied(
    policy: Policy | Sequence[Frame], workspace: str, *, home: str | None = None
) -> tuple[str, ...]:
    """Paths (relative to the repository's top) that git tracks and ``policy`` denies
    reading: by ``paths.deny`` or a sensitive-path default it does not lift."""
    if not isinstance(policy, Policy):
        policy = combined_policy(policy)
    listing = tracked_files(workspace)
    if listing is None:
        return ()
    top, files = listing
    ctx = make_context(os.path.realpath(workspace), home)
    key = (top, _index_signature(top), policy, ctx)
    with _LOCK:
        hit = _VERDICTS.get(key)
    if hit is not None:
        return hit
    out = _denied(policy, ctx, top, files)
    if key[1] is not None:
        with _LOCK:
            if len(_VERDICTS) > 256:
                _VERDICTS.clear()
            _VERDICTS[key] = out
    return out


def _denied(policy: Policy, ctx: PathContext, top: str, files: Sequence[str]) -> tuple[str, ...]:
    deny = policy.compiled.path_check(ctx, "read").deny if policy.paths.restricted else None
    out: list[str] = []
    for rel in files:
        path = os.path.join(top, rel)
        denied = deny is not None and deny.first_match(path) is not None
        if denied or any(n not in policy.allow_sensitive for n in sensitive_names(path, ctx)):
            out.append(rel)
    return tuple(out)


def tracked_note(denied: Sequence[str], limit: int = 5) -> str:
    """The sentence the receipt and the checks print for ``denied`` (non-empty)."""
    shown = ", ".join(denied[:limit]) + (
        f" and {len(denied) - limit} more" if len(denied) > limit else ""
    )
    return (
        f"git tracks {len(denied)} path(s) the policy denies ({shown}): their content is in "
        "the repository's object store, which no mask covers (git log -p, git cat-file -p "
        "<blob id> print it); remove them from the history or keep such repositories away"
    )
