"""Red team: a scripted model drives ``agent_loop`` with the real built-in tools.

Every hostile case checks the effect (the file, the git remote), not just the decision,
and has an allowed twin that must still work.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop, builtin_tools
from charter.policy import make_context, resolve_target

from .conftest import tc

POLICY: dict[str, Any] = {
    "commands": {
        "allow": ["git:*", "echo:*", "cat:*"],
        "deny": ["rm -rf:*", "git push --force:*"],
    },
    "paths": {"deny": ["./secrets/**"]},
}


def _obs(result: Any) -> list[str]:
    return [m["content"] for m in result.transcript["messages"] if m["role"] == "tool"]


def _run(ws: Path, *turns: dict[str, Any], names: tuple[str, ...] | None = None) -> list[str]:
    tools = builtin_tools(str(ws)) if names is None else builtin_tools(str(ws), names=names)
    provider = MockProvider([*turns, "done"])
    result = agent_loop("x", provider=provider, tools=tools, workspace=str(ws), policy=POLICY)
    return _obs(result)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "secrets" / "deep").mkdir(parents=True)
    (root / "secrets" / "token.txt").write_text("TOKEN=hunter2\n")
    (root / "secrets" / "deep" / "key.txt").write_text("KEY=abc\n")
    (root / "src").mkdir()
    (root / "src" / "a.txt").write_text("hello\n")
    return root


def test_listing_is_reading(ws: Path) -> None:
    obs = _run(
        ws,
        tc("glob", pattern="**/*"),
        tc("glob", pattern="secrets/**/*"),
        tc("glob", pattern="*", path="secrets"),
        tc("glob", pattern="deep/*", path="secrets"),
        tc("grep", pattern="=", path="."),
        tc("glob", pattern="src/*"),
    )
    assert "src/a.txt" in obs[0] and "secrets" not in obs[0]
    for hostile in obs[1:4]:
        assert "token" not in hostile and "key.txt" not in hostile
        assert "denied" in hostile
    assert "hunter2" not in obs[4] and "KEY=abc" not in obs[4]
    assert json.loads(obs[5]) == ["src/a.txt"]


def test_bad_path_input_is_a_denial_not_a_crash(ws: Path) -> None:
    obs = _run(
        ws,
        tc("read", path="src/a.txt\x00/../../secrets/token.txt"),
        tc("write", path="src/b\x00.txt", content="x"),
        tc("read", path=["secrets/token.txt"]),
        tc("read", path={"p": "secrets/token.txt"}),
        tc("read", path="src/a.txt"),
    )
    for hostile in obs[:4]:
        assert "hunter2" not in hostile and ("denied" in hostile or "error" in hostile)
    assert "permission_denied" in obs[0] and "NUL" in obs[0]
    assert not list((ws / "src").glob("b*"))
    assert obs[4] == "hello"


def test_misspelt_or_undecodable_arguments_are_denials(ws: Path) -> None:
    """A handler that takes ``**kwargs`` would read what the policy never saw."""
    from charter.agent import make_tool

    seen: list[str] = []

    def loose_read(**kwargs: Any) -> str:
        target = next(iter(kwargs.values()))
        seen.append(target)
        return (ws / target).read_text(errors="replace")

    loose = make_tool(loose_read, name="read", parameters={"type": "object"})
    provider = MockProvider(
        [
            tc("read", pth="secrets/token.txt"),  # misspelt: no path the policy can judge
            tc("read", path="secrets/\udcfftoken.txt"),  # not UTF-8 text
            tc("read", path="src/a.txt"),  # the allowed twin
            "done",
        ]
    )
    result = agent_loop("x", provider=provider, tools=[loose], workspace=str(ws), policy=POLICY)
    obs = _obs(result)
    assert "permission_denied" in obs[0] and "needs a path argument" in obs[0]
    assert "permission_denied" in obs[1] and "UTF-8" in obs[1]
    assert obs[2] == "hello\n"
    assert seen == ["src/a.txt"]  # the hostile calls never reached the handler
    bash = _run(ws, tc("bash", cmd="rm -rf src"), names=("bash",))
    assert "permission_denied" in bash[0] and (ws / "src" / "a.txt").exists()


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read", {}),
        ("write", {"content": "pwned"}),
        ("edit", {"old_string": "keep", "new_string": "pwned"}),
    ],
)
def test_symlink_swapped_after_the_decision_is_not_followed(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, args: dict[str, Any]
) -> None:
    from charter.agent import hostfs

    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    target = ws / "src" / "a.txt"
    real = hostfs.resolve_target

    def racing(value: str, ctx: Any) -> str:
        # the decision saw a plain file; an attacker swaps in a link before the open
        resolved = real(value, ctx)
        target.unlink()
        target.symlink_to(outside)
        return resolved

    monkeypatch.setattr(hostfs, "resolve_target", racing)
    tool = {t.name: t for t in builtin_tools(str(ws), names=(name,))}[name]
    with pytest.raises(OSError):
        tool.handler(path="src/a.txt", **args)
    assert outside.read_text() == "keep"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read", {}),
        ("write", {"content": "pwned"}),
        ("edit", {"old_string": "keep", "new_string": "pwned"}),
    ],
)
def test_parent_directory_swapped_after_the_decision_is_not_followed(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, args: dict[str, Any]
) -> None:
    """The class, not the example: a link swapped in for a *directory* of the path."""
    from charter.agent import hostfs

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.txt").write_text("keep")
    real = hostfs.resolve_target

    def racing(value: str, ctx: Any) -> str:
        resolved = real(value, ctx)
        (ws / "src").rename(ws / "src.moved")
        (ws / "src").symlink_to(elsewhere, target_is_directory=True)
        return resolved

    monkeypatch.setattr(hostfs, "resolve_target", racing)
    tool = {t.name: t for t in builtin_tools(str(ws), names=(name,))}[name]
    with pytest.raises(OSError):
        tool.handler(path="src/a.txt", **args)
    assert (elsewhere / "a.txt").read_text() == "keep"


def test_plain_files_still_open_through_the_walk(ws: Path) -> None:
    obs = _run(
        ws,
        tc("write", path="src/deep/new.txt", content="made"),
        tc("read", path="src/deep/new.txt"),
        tc("edit", path="src/a.txt", old_string="hello", new_string="bye"),
    )
    assert "permission_denied" not in obs[0] and obs[1] == "made"
    assert (ws / "src" / "a.txt").read_text() == "bye\n"


def test_tilde_user_resolves_like_the_shell() -> None:
    import pwd

    ctx = make_context("/tmp")
    me = pwd.getpwuid(os.getuid())
    assert resolve_target(f"~{me.pw_name}/x", ctx) == os.path.realpath(me.pw_dir + "/x")
    assert resolve_target("~nosuchuser-zz/x", ctx) == "/tmp/~nosuchuser-zz/x"
    assert resolve_target("$HOME/x", ctx) == "/tmp/$HOME/x"  # never expanded by either


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(ws: Path) -> tuple[Path, Path]:
    remote = ws / "remote.git"
    _git("init", "-q", "--bare", "-b", "main", str(remote), cwd=ws)
    clone = ws / "work"
    _git("init", "-q", "-b", "main", str(clone), cwd=ws)
    for key, value in (("user.name", "t"), ("user.email", "t@x"), ("commit.gpgsign", "false")):
        _git("config", key, value, cwd=clone)
    _git("remote", "add", "origin", str(remote), cwd=clone)
    (clone / "f").write_text("1")
    _git("add", "f", cwd=clone)
    _git("commit", "-qm", "one", cwd=clone)
    _git("push", "-q", "origin", "main", cwd=clone)
    # rewrite history locally: only a force push could land it
    _git("commit", "-q", "--amend", "-m", "rewritten", cwd=clone)
    return remote, clone


@pytest.mark.parametrize(
    "line",
    [
        "git push --force origin main",
        "git push -f origin main",
        "git push --force-with-lease origin main",
        "git push --force-if-includes --force-with-lease origin main",
        "git push origin +main",
        "git push --mirror origin",
        "git push >/dev/null --force origin main",
        "bash -c -- 'git push --force origin main'",
        "flock lockfile -c 'git push -f origin main'",
        "GIT_SSH_COMMAND=true git push --force origin main",
        "git -c alias.p='push --force' p origin main",
    ],
)
def test_force_push_spellings_never_land(repo: tuple[Path, Path], line: str) -> None:
    remote, clone = repo
    before = _git("rev-parse", "main", cwd=remote)
    obs = _run(clone.parent, tc("bash", command=f"cd work && {line}"), names=("bash",))
    assert "permission_denied" in obs[0], obs[0]
    assert _git("rev-parse", "main", cwd=remote) == before


def test_plain_push_still_lands(repo: tuple[Path, Path]) -> None:
    remote, clone = repo
    (clone / "g").write_text("2")
    _git("reset", "-q", "--hard", "origin/main", cwd=clone)
    (clone / "g").write_text("2")
    _git("add", "g", cwd=clone)
    _git("commit", "-qm", "two", cwd=clone)
    obs = _run(
        clone.parent, tc("bash", command="cd work && git push -q origin main"), names=("bash",)
    )
    assert "permission_denied" not in obs[0], obs[0]
    assert _git("rev-parse", "main", cwd=remote) == _git("rev-parse", "HEAD", cwd=clone)


@pytest.mark.parametrize(
    "line",
    [
        "echo >out rm -rf src",
        "xargs -i rm -rf src </dev/null",
        "env -S'rm -rf src'",
        "./git status",
        "cat 2>&1 -- src/a.txt; rm 2>/dev/null -rf src",
        # launcher options charter's tables do not know (newer coreutils' env -a ARGV0
        # takes a value: the program is rm, not echo): denied, never guessed
        "env -a echo rm -rf src",
        "xargs --new-option echo rm -rf src </dev/null",
        "timeout --frobnicate 5 echo rm -rf src",
    ],
)
def test_shell_spellings_never_delete(ws: Path, line: str) -> None:
    obs = _run(ws, tc("bash", command=line), tc("bash", command="cat src/a.txt"), names=("bash",))
    assert (ws / "src" / "a.txt").exists()
    if line.startswith("echo >out"):
        # words after a redirection are echo's arguments: harmless, and allowed
        assert (ws / "out").read_text() == "rm -rf src\n"
    else:
        assert "permission_denied" in obs[0], obs[0]
    assert "hello" in obs[1]


def test_known_launcher_options_still_run(ws: Path) -> None:
    obs = _run(
        ws,
        tc("bash", command="env -i FOO=1 echo env-ok"),
        tc("bash", command="echo x | xargs -0 -r echo xargs-ok"),
        names=("bash",),
    )
    assert json.loads(obs[0])["stdout"] == "env-ok\n", obs[0]
    assert "xargs-ok" in obs[1], obs[1]
