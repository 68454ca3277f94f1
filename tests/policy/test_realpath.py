"""The policy's path resolver gives exactly ``os.path.realpath``'s answer (hypothesis).

Random trees of directories, files and symlinks (relative, absolute, dangling, looping,
through ``..``, to files), queried with random paths (``.``, ``..``, empty components,
missing tails, trailing slashes): the fast resolver and the reference must agree on
every one, so no tree can make the policy judge a different file than the reference
resolution names.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from charter.policy import realpath as fast

NAMES = ["a", "b", "c", "d"]
COMPONENTS = [*NAMES, ".", "..", "", "missing", "a.txt"]

_rel_target = st.lists(st.sampled_from([*NAMES, ".", "..", "missing", "a.txt"]), max_size=4)


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """``(relative path, kind, link target)`` entries, parents before children."""
    entries: list[tuple[str, str, str]] = []
    dirs = [""]
    for _ in range(draw(st.integers(0, 14))):
        parent = draw(st.sampled_from(dirs))
        name = draw(st.sampled_from([*NAMES, "a.txt"]))
        rel = f"{parent}/{name}" if parent else name
        if any(e[0] == rel for e in entries):
            continue
        kind = draw(st.sampled_from(["dir", "dir", "file", "link", "link", "link"]))
        target = ""
        if kind == "link":
            how = draw(st.sampled_from(["rel", "rel", "abs", "dangling", "self", "root"]))
            if how == "rel":
                target = "/".join(draw(_rel_target)) or "."
            elif how == "abs":
                target = "@ROOT@/" + "/".join(draw(_rel_target))
            elif how == "dangling":
                target = "/nonexistent-charter-test/x"
            elif how == "self":
                target = name
            else:
                target = "/"
        entries.append((rel, kind, target))
        if kind == "dir":
            dirs.append(rel)
    return entries


queries = st.lists(
    st.tuples(
        st.lists(st.sampled_from(COMPONENTS), min_size=0, max_size=6),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


def _build(root: str, entries: list[tuple[str, str, str]]) -> None:
    for rel, kind, target in entries:
        full = os.path.join(root, rel)
        if kind == "dir":
            os.makedirs(full, exist_ok=True)
        elif kind == "file":
            with open(full, "w") as fh:
                fh.write("x")
        else:
            os.symlink(target.replace("@ROOT@", root), full)


@pytest.mark.skipif(not fast.ENABLED, reason="no O_PATH or /proc/self/fd on this platform")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=trees(), paths=queries, probe=st.sampled_from(["access", "stat", "refused", "liar"]))
def test_matches_os_realpath(
    entries: list[tuple[str, str, str]], paths: list[Any], probe: str
) -> None:
    root = tempfile.mkdtemp(prefix="charter-realpath-")
    try:
        _build(root, entries)
        with contextlib.ExitStack() as stack:
            if probe == "stat":  # no effective-ids ``access`` on this platform
                stack.enter_context(mock.patch.object(fast, "_ACCESS_EFFECTIVE", False))
            elif probe == "refused":  # a seccomp filter refusing ``access``: only slower
                stack.enter_context(mock.patch.object(fast, "_exists", lambda path: False))
            elif probe == "liar":  # a guess that is always wrong the other way
                stack.enter_context(mock.patch.object(fast, "_exists", lambda path: True))
            for components, trailing in paths:
                query = root + "/" + "/".join(components) + ("/" if trailing else "")
                assert fast.realpath(query) == os.path.realpath(query), query
    finally:
        shutil.rmtree(root)


def test_symlinked_root_and_swaps(tmp_path: Any) -> None:
    """A symlink on the way is followed, and a swapped link is seen on the next call."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    query = str(tmp_path / "link" / "sub" / "new.py")
    assert fast.realpath(query) == str(tmp_path / "real" / "sub" / "new.py")
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to(tmp_path / "other")
    assert fast.realpath(query) == os.path.realpath(query) == str(tmp_path / "other/sub/new.py")


def test_plain_paths(tmp_path: Any) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    base = os.path.realpath(tmp_path)
    for query in (
        f"{base}/d/f",
        f"{base}/d/./f",
        f"{base}//d/f/",
        f"{base}/d/missing/deeper",
        f"{base}/d/f/under-a-file",
        "/",
        "//",
        f"{base}/d/\udcff",
    ):
        assert fast.realpath(query) == os.path.realpath(query), query


def test_dangling_link_in_missing_tail(tmp_path: Any) -> None:
    """A dangling link fails to open like a missing file; it is still followed."""
    (tmp_path / "dl").symlink_to("/nonexistent-charter-test/target")
    query = str(tmp_path / "dl" / "x")
    assert fast.realpath(query) == "/nonexistent-charter-test/target/x"
    assert fast.realpath(str(tmp_path / "dl")) == "/nonexistent-charter-test/target"


def test_decisions_follow_a_swapped_link(tmp_path: Any) -> None:
    """Verdicts are memoised per resolved target only: a link swapped between two calls
    is resolved again, so the second call is judged by where the link points now."""
    from charter.policy import Frame, Policy, ToolAnnotations, ToolCall, decide, make_context

    ws = tmp_path / "ws"
    (ws / "inside").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "link").symlink_to(ws / "inside")
    ctx = make_context(str(ws), str(tmp_path / "home"))
    frames = [Frame(Policy.from_dict({"paths": {"allow": ["./"]}}), "ws", "ambient")]
    call = ToolCall(
        "read", {"path": "link/f.txt"}, ToolAnnotations(kind="read", path_args=("path",))
    )
    for _ in range(2):
        assert decide(call, frames, context=ctx).allowed
        (ws / "link").unlink()
        (ws / "link").symlink_to(outside)
        denied = decide(call, frames, context=ctx)
        assert not denied.allowed
        assert denied.subject == os.path.realpath(outside / "f.txt")
        (ws / "link").unlink()
        (ws / "link").symlink_to(ws / "inside")


def test_context_hash_survives_pickling_across_processes() -> None:
    """PathContext caches its hash; one pickled elsewhere (another hash seed) must still
    find its equal in a dict here (contexts key the matcher caches and memos)."""
    import pickle
    import subprocess
    import sys

    from charter.policy.paths import PathContext

    code = (
        "import pickle, sys\n"
        "from charter.policy.paths import PathContext\n"
        "sys.stdout.buffer.write(pickle.dumps(PathContext('/ws', '/home/u')))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, check=True
    ).stdout
    theirs = pickle.loads(out)
    ours = PathContext("/ws", "/home/u")
    assert theirs == ours and hash(theirs) == hash(ours)
    assert {ours: "found"}[theirs] == "found"
