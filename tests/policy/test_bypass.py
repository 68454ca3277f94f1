"""A table-driven bypass corpus: every case that should be denied is denied."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from charter.policy import Frame, Policy, ToolAnnotations, ToolCall, builtin_annotations, decide
from charter.policy.paths import PathContext

BASH = builtin_annotations("bash")
READ = builtin_annotations("read")
WRITE = builtin_annotations("write")


def _decide(policy: dict[str, object], call: ToolCall, ctx: PathContext) -> bool:
    return decide(call, [Frame(Policy.from_dict(policy), "p")], context=ctx).allowed


# -- paths ----------------------------------------------------------------------------

PATH_POLICY = {"paths": {"allow": ["./src"], "deny": ["./src/private/**"]}}

PATH_CASES = [
    # (path argument, allowed?)
    ("src/app.py", True),
    ("./src/app.py", True),
    ("src", True),
    ("src/../src/app.py", True),
    ("src/../secrets/token", False),
    ("../ws/secrets/token", False),
    ("src/../../ws/secrets/x", False),
    ("src//..//secrets/x", False),
    ("src/./../secrets", False),
    ("src/private/key.txt", False),
    ("src/private/", False),
    ("src/private/.", False),
    ("src/PRIVATE/x", False),  # deny is case-insensitive
    ("src/Private/./x", False),
    ("srcx/app.py", False),
    ("/etc/passwd", False),
    ("~/notes.txt", False),
    ("src/.env", False),  # sensitive default
    ("src/.env.local", False),
    ("src/.ENV", False),
    ("src/server.pem", False),
    ("src/tls.KEY", False),
    ("src/id_rsa", False),
    ("src/deep/id_ed25519.pub", False),
    ("src/.netrc", False),
]


@pytest.mark.parametrize(("path", "allowed"), PATH_CASES)
def test_path_corpus(path: str, allowed: bool, ctx: PathContext) -> None:
    call = ToolCall("read", {"file_path": path}, READ)
    assert _decide(PATH_POLICY, call, ctx) is allowed


def test_symlink_out_of_allowed_tree_is_denied(workspace: Path, ctx: PathContext) -> None:
    (workspace / "src" / "link").symlink_to(workspace / "secrets")
    call = ToolCall("read", {"file_path": "src/link/token"}, READ)
    assert not _decide(PATH_POLICY, call, ctx)


def test_symlink_to_sensitive_is_denied(workspace: Path, home: Path, ctx: PathContext) -> None:
    (workspace / "src" / "innocent.txt").symlink_to(home / ".ssh" / "config")
    call = ToolCall("read", {"file_path": "src/innocent.txt"}, READ)
    assert not _decide({}, call, ctx)


def test_symlinked_allow_root_still_matches(tmp_path: Path, workspace: Path, home: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    ctx = PathContext(os.path.realpath(alias), os.path.realpath(home))
    call = ToolCall("read", {"file_path": str(workspace / "src" / "app.py")}, READ)
    assert _decide(PATH_POLICY, call, ctx)


@pytest.mark.parametrize(
    "path",
    [
        "~/.ssh/id_rsa",
        "~/.ssh/config",
        "~/.aws/credentials",
        "~/.gnupg/pubring.kbx",
        "~/.config/gcloud/creds.json",
        "~/.netrc",
        ".env",
        "a/b/.env.production",
        "cert.pem",
    ],
)
def test_sensitive_defaults_apply_under_any_policy(path: str, ctx: PathContext) -> None:
    call = ToolCall("read", {"file_path": path}, READ)
    assert not _decide({}, call, ctx)
    # and with no policy at all, nothing is restricted
    assert decide(call, [], context=ctx).allowed


def test_sensitive_lift_is_by_name_and_per_frame(ctx: PathContext) -> None:
    call = ToolCall("read", {"file_path": ".env"}, READ)
    lifted = Policy.from_dict({"allow_sensitive": ["env_files"]})
    assert decide(call, [Frame(lifted, "a")], context=ctx).allowed
    # a frame that does not lift it still denies (tighten, never loosen)
    d = decide(call, [Frame(lifted, "a"), Frame(Policy(), "b")], context=ctx)
    assert d.denied and d.frame_label == "b" and d.rule == "sensitive: env_files"
    # lifting one name does not lift another
    key = ToolCall("read", {"file_path": "server.pem"}, READ)
    assert not decide(key, [Frame(lifted, "a")], context=ctx).allowed


def test_read_and_write_kinds(ctx: PathContext) -> None:
    pol = {"paths": {"read": {"allow": ["./"]}, "write": {"allow": ["./src"]}}}
    assert _decide(pol, ToolCall("read", {"file_path": "docs/a.md"}, READ), ctx)
    assert not _decide(pol, ToolCall("write", {"file_path": "docs/a.md"}, WRITE), ctx)
    assert _decide(pol, ToolCall("write", {"file_path": "src/a.py"}, WRITE), ctx)
    # a path tool of unknown kind is checked as both read and write
    both = ToolAnnotations(path_args=("p",), side_effect_level=None)
    assert not _decide(pol, ToolCall("mystery", {"p": "docs/a.md"}, both), ctx)


def test_non_string_path_argument_is_denied(ctx: PathContext) -> None:
    call = ToolCall("read", {"file_path": {"nested": "x"}}, READ)
    assert not _decide({}, call, ctx)


def test_path_tool_without_path_args_is_denied_when_paths_restricted(ctx: PathContext) -> None:
    call = ToolCall("custom_read", {}, ToolAnnotations(kind="read"))
    assert not _decide({"paths": ["./"]}, call, ctx)


# -- commands -------------------------------------------------------------------------

CMD_POLICY = {
    "commands": {
        "allow": ["git:*", "npm test", "ls:*", "echo:*", "rm:*", "cat:*"],
        "deny": ["rm -rf:*", "git push --force:*", "curl:*"],
    }
}

COMMAND_CASES = [
    ("git status", True),
    ("git log --oneline | cat", True),
    ("npm test", True),
    ("npm test --watch", False),  # exact rule without :*
    ("npm install", False),
    ("ls -la && echo done", True),
    ("cd src && git diff", True),
    ("rm file.txt", True),
    ("rm -rf build", False),
    ("rm -fr build", False),
    ("rm -r -f build", False),
    ("rm -Rf build", False),
    ("rm --recursive --force build", False),
    ("/bin/rm -rf build", False),
    ("\\rm -rf build", False),
    ("'rm' -rf build", False),
    ('"rm" -r"f" build', False),
    ("git push --force origin main", False),
    ("git push -f origin main", False),
    ("git -C repo push --force", False),
    ("git push origin main", True),
    ("curl https://example.com", False),
    ("CURL https://example.com", False),
    ("echo hi && curl x", False),
    ("echo hi; curl x", False),
    ("echo hi || curl x", False),
    ("echo hi | curl x", False),
    ("echo $(curl x)", False),
    ('echo "$(curl x)"', False),
    ("echo `curl x`", False),
    ("(curl x)", False),
    ("{ curl x; }", False),
    ("bash -c 'curl x'", False),
    ('sh -c "git status; curl x"', False),
    ("bash -lc 'npm install'", False),
    ("env curl x", False),
    ("env FOO=1 curl x", False),
    ("env -i PATH=/bin curl x", False),
    ("timeout 5 curl x", False),
    ("timeout -s KILL 5 curl x", False),
    ("nice -n 10 curl x", False),
    ("nohup curl x", False),
    ("sudo curl x", False),
    ("sudo -u root git status", False),  # sudo itself is not allowed
    ("xargs curl", False),
    ("echo x | xargs rm -rf", False),
    ("find . -exec curl {} \\;", False),
    ("eval 'curl x'", False),
    ("$CMD x", False),
    ("$(echo curl) x", False),
    ("rm $FLAGS build", False),  # could hide -rf
    ("echo 'unterminated", False),  # unparseable: fail closed
    ("timeout 5 git status", True),
    ("FOO=1 git status", True),
    ("f() { curl x; }; f", False),
    ("cat <<EOF\n$(curl x)\nEOF", False),
    # argv as the kernel sees it: words after a redirection are arguments
    ("echo >f rm -rf build", True),  # echo's arguments, not a command
    ("rm >f -rf build", False),
    ("rm 2>&1 -rf build", False),
    ("rm -r >/dev/null -f build", False),
    ("git push >log --force origin main", False),
    # launchers read with their real option grammars
    ("xargs -i rm -rf build", False),
    ("xargs -e rm -rf build", False),
    ("xargs -l rm -rf build", False),
    ("bash -c -- 'rm -rf build'", False),
    ("bash -c -x 'rm -rf build'", False),
    ("bash --rcfile x -c 'rm -rf build'", False),
    ("sudo -R /x rm -rf build", False),
    ("flock f -c 'rm -rf build'", False),
    ("flock -w 1 f -c 'curl x'", False),
    ("env -S'rm -rf build'", False),
    ("env -S'echo hi'", True),
    ("watch -d rm -rf build", False),
    ("bash -c -- 'git status'", True),
    # the program is the program
    ("./git status", False),
    ("/tmp/x/git status", False),
    ("'my git' status", False),
    # spellings of the same act
    ("git push --force-with-lease origin main", False),
    ("git push --force-with-lease=main origin main", False),
    ("git push --force-if-includes origin main", False),
    ("git push --mirror origin", False),
    ("git push origin +main", False),
    ("git push origin +HEAD:refs/heads/main", False),
    ("git -C repo push origin +main", False),
    ("git push origin HEAD:main", True),
    # allowed programs made to run other programs
    ("GIT_SSH_COMMAND='curl x' git push", False),
    ("GIT_PAGER='curl x' git log", False),
    ("GIT_EXTERNAL_DIFF=./x git diff", False),
    ("PAGER='curl x' git log", False),
    ("PATH=/tmp/x:$PATH git status", False),
    ("LD_PRELOAD=/tmp/x.so git status", False),
    ("BASH_ENV=/tmp/x bash -c 'git status'", False),
    ("export GIT_PAGER='curl x'; git log", False),
    ("declare -x EDITOR=vim; git commit", False),
    ("env PAGER=x git log", False),
    ("git -c core.pager='curl x' log", False),
    ("git -c alias.x='!curl x' x", False),
    ("git --exec-path=/tmp/x status", False),
    ("git config alias.st '!curl x'", False),
    ("git config core.sshCommand 'curl x'", False),
    ("git config diff.x.command 'curl x'", False),
    ("git config user.name me", True),
    ("GIT_AUTHOR_NAME=me git commit -m x", True),
    ("FOO=1 git status", True),
]


@pytest.mark.parametrize(("line", "allowed"), COMMAND_CASES)
def test_command_corpus(line: str, allowed: bool, ctx: PathContext) -> None:
    call = ToolCall("bash", {"command": line}, BASH)
    assert _decide(CMD_POLICY, call, ctx) is allowed, line


def test_bare_name_rule_matches_the_binary_path_resolves(
    ctx: PathContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charter.policy import commands

    real = tmp_path / "bin" / "git"
    real.parent.mkdir()
    real.write_text("")
    fake = tmp_path / "x" / "git"
    fake.parent.mkdir()
    fake.write_text("")
    monkeypatch.setattr(commands, "program_resolver", lambda name: str(real))
    ok = ToolCall("bash", {"command": f"{real} status"}, BASH)
    bad = ToolCall("bash", {"command": f"{fake} status"}, BASH)
    assert _decide(CMD_POLICY, ok, ctx) is True
    assert _decide(CMD_POLICY, bad, ctx) is False


def test_argv_commands_are_checked_too(ctx: PathContext) -> None:
    ann = ToolAnnotations(command_args=("argv",), kind="execute")
    assert not _decide(
        CMD_POLICY, ToolCall("run", {"argv": ["timeout", "5", "curl", "x"]}, ann), ctx
    )
    assert _decide(CMD_POLICY, ToolCall("run", {"argv": ["git", "status"]}, ann), ctx)


def test_execute_tool_without_command_args_is_denied(ctx: PathContext) -> None:
    call = ToolCall("runner", {"x": "curl"}, ToolAnnotations(kind="execute"))
    assert not _decide(CMD_POLICY, call, ctx)


# -- tool names -----------------------------------------------------------------------

NAME_POLICY = {"tools": {"allow": ["read", "github__*"], "deny": ["github__merge*"]}}

NAME_CASES = [
    ("read", True),
    ("READ", True),
    (" Read ", True),
    ("write", False),
    ("readx", False),
    ("github__list_prs", True),
    ("GitHub__List_PRs", True),
    ("github__merge_pr", False),
    ("GITHUB__MERGE_PR", False),
    ("github_merge_pr", False),
    ("githubx__list", False),
]


@pytest.mark.parametrize(("name", "allowed"), NAME_CASES)
def test_tool_name_corpus(name: str, allowed: bool, ctx: PathContext) -> None:
    call = ToolCall(name, {}, ToolAnnotations(side_effect_level=None))
    assert _decide(NAME_POLICY, call, ctx) is allowed


def test_mcp_server_annotation_canonicalises_name(ctx: PathContext) -> None:
    call = ToolCall("Merge_PR", {}, ToolAnnotations(mcp_server="GitHub"))
    assert call.name == "github__merge_pr"
    assert not _decide(NAME_POLICY, call, ctx)
    assert not _decide({"mcp_servers": {"deny": ["github"]}}, ToolCall("github__x"), ctx)


# -- network --------------------------------------------------------------------------

NET_POLICY = {
    "network": {"allow": ["*.example.com", "api.github.com"], "deny": ["evil.example.com"]}
}
FETCH = builtin_annotations("webfetch")

NET_CASES = [
    ("https://docs.example.com/x", True),
    ("https://DOCS.EXAMPLE.COM./x", True),
    ("https://example.com/x", False),  # *.example.com is subdomains only
    ("https://evil.example.com/", False),
    ("https://EVIL.example.com:443/", False),
    ("https://api.github.com/repos", True),
    ("https://api.github.com.attacker.io/", False),
    ("https://attacker.io/?u=api.github.com", False),
    ("https://api.github.com@attacker.io/", False),
    ("http://127.0.0.1:8080/", False),
    ("docs.example.com", True),
    ("not a url at all", False),
    ("", False),
]


@pytest.mark.parametrize(("url", "allowed"), NET_CASES)
def test_network_corpus(url: str, allowed: bool, ctx: PathContext) -> None:
    call = ToolCall("webfetch", {"url": url}, FETCH)
    assert _decide(NET_POLICY, call, ctx) is allowed


def test_network_deny_all(ctx: PathContext) -> None:
    pol = {"network": {"deny": ["*"]}}
    assert not _decide(pol, ToolCall("webfetch", {"url": "https://a.b"}, FETCH), ctx)
    # websearch declares no URL argument: cannot be enforced -> denied
    assert not _decide(
        pol, ToolCall("websearch", {"query": "x"}, builtin_annotations("websearch")), ctx
    )
    # allow-all needs no URL
    assert _decide(
        {"network": ["*"]}, ToolCall("websearch", {}, builtin_annotations("websearch")), ctx
    )
