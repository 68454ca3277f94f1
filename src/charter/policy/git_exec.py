"""git's option grammar for what makes git run another program.

An allow rule ``git:*`` means git, not every program git can be told to run. This module
reads a git command line the way git's parse-options does (long options by any unique
prefix, ``--opt=value`` and ``--opt value``, short clusters with attached values, ``--``)
and says what it would execute:

- a shell command the caller wrote (``ls-remote --upload-pack=CMD``, ``grep -OCMD``,
  ``difftool -x CMD``, ``rebase --exec CMD``, ``submodule foreach CMD``,
  ``filter-branch --tree-filter CMD``, ``send-email --to-cmd CMD``, ...): judged as that
  command line, so ``git rebase -x 'make test'`` needs ``make`` to be allowed;
- a program and its arguments (``bisect run make test``): judged as that command;
- something chosen by configuration or a directory the caller names (``-c``,
  ``--config-env``, ``--exec-path=DIR``, ``clone --template=DIR``, ``git config alias.x``,
  ``difftool``/``mergetool`` tools): a program chosen at run time, denied under an allow
  list.

What a repository's own configuration and hooks run is the sandbox's to contain (those
files are read-only to a sandboxed shell: ``charter.policy.runs_later``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

Token = str | None


@dataclass(frozen=True, slots=True)
class GitRun:
    """One thing a git command line runs: ``script`` (a shell command line), ``argv`` (a
    program and its arguments), or neither (``why`` says what chooses the program)."""

    why: str
    script: str | None = None
    argv: tuple[Token, ...] | None = None


#: Global options (before the subcommand) that take the next word as their value.
_GLOBAL_WITH_VALUE = frozenset({"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix"})

#: Per subcommand: options whose value git runs, and how (``sh``: a shell command line;
#: ``sh?``: an optional, attached-only value, else the configured pager/program; ``dir`` /
#: ``config``: code from a directory or configuration the caller names; ``prog``: a
#: program when the value is an absolute path, else a host name).
_EXEC_OPTIONS: dict[str, dict[str, str]] = {
    "ls-remote": {"--upload-pack": "sh", "-u": "sh"},
    "fetch": {"--upload-pack": "sh"},
    "pull": {"--upload-pack": "sh"},
    "clone": {"--upload-pack": "sh", "-u": "sh", "--template": "dir", "--config": "config",
              "-c": "config"},
    "fetch-pack": {"--upload-pack": "sh", "--exec": "sh"},
    "push": {"--receive-pack": "sh", "--exec": "sh"},
    "send-pack": {"--receive-pack": "sh", "--exec": "sh"},
    "archive": {"--exec": "sh"},
    "grep": {"-O": "sh?", "--open-files-in-pager": "sh?"},
    "difftool": {"-x": "sh", "--extcmd": "sh"},
    "rebase": {"-x": "sh", "--exec": "sh"},
    "init": {"--template": "dir"},
    "send-email": {"--to-cmd": "sh", "--cc-cmd": "sh", "--header-cmd": "sh",
                   "--sendmail-cmd": "sh", "--smtp-server": "prog"},
    "instaweb": {"--httpd": "sh", "-d": "sh", "--browser": "sh", "-b": "sh"},
    "filter-branch": {
        "--setup": "sh", "--env-filter": "sh", "--tree-filter": "sh", "--index-filter": "sh",
        "--parent-filter": "sh", "--msg-filter": "sh", "--commit-filter": "sh",
        "--tag-name-filter": "sh",
    },
}  # fmt: skip

#: Subcommands that always run a program their configuration chooses.
_TOOL_RUNNERS = {
    "difftool": "git difftool runs the diff tool its configuration (diff.tool) names",
    "mergetool": "git mergetool runs the merge tool its configuration (merge.tool) names",
}

#: ``git config`` keys whose value is a command git runs (or a place it runs code from).
GIT_EXEC_KEYS = (
    "alias.",
    "core.",
    "diff.",
    "merge.",
    "filter.",
    "credential.",
    "sequence.",
    "gpg.",
    "uploadpack.",
    "receivepack.",
    "remote.",
    "url.",
    "include",
    "pager.",
    "interactive.",
    "sendemail.",
    "web.",
    "browser.",
    "difftool.",
    "mergetool.",
    "man.",
    "submodule.",
    "protocol.",
    "trailer.",
    "gc.",
    "maintenance.",
    "safe.",
    "hook.",
)

#: ``git config`` options that take the next word as their value (not a key).
_CONFIG_WITH_VALUE = frozenset(
    {"-f", "--file", "--blob", "--type", "--default", "--comment", "--value"}
)


def subcommand(argv: Sequence[Token]) -> tuple[str | None, int]:
    """git's subcommand and its index in ``argv`` (``None`` when it is computed at run time
    or absent), skipping the global options."""
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok is None:
            return None, i
        if tok in _GLOBAL_WITH_VALUE or tok == "-c":
            i += 2
            continue
        if tok.startswith("-"):
            i += 1
            continue
        return tok, i
    return None, len(argv)


def _global_runs(argv: Sequence[Token]) -> Iterator[GitRun]:
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok is None:
            yield GitRun("a git option is computed at run time")
            return
        if tok == "-c" or (tok.startswith("-c") and len(tok) > 2):
            yield GitRun("git -c sets configuration, which can name a program to run")
        elif tok == "--config-env" or tok.startswith("--config-env="):
            yield GitRun("git --config-env sets configuration, which can name a program")
        elif tok.startswith("--exec-path="):
            yield GitRun("git --exec-path= runs git's commands from a directory the caller names")
        if tok in _GLOBAL_WITH_VALUE or tok == "-c":
            i += 2
            continue
        if not tok.startswith("-"):
            return
        i += 1


def _long_match(tok: str, table: dict[str, str]) -> tuple[str, str | None] | None:
    """``(option, attached value)`` when ``tok`` is a long option of ``table`` or a unique-or-
    not prefix of one (git accepts abbreviations; an ambiguous one is taken as the exec
    option, the fail-closed reading)."""
    name, eq, value = tok.partition("=")
    if len(name) <= 2:
        return None
    for option in table:
        if option.startswith("--") and option.startswith(name):
            return option, (value if eq else None)
    return None


def _short_match(tok: str, table: dict[str, str]) -> tuple[str, str | None] | None:
    """``(option, attached value)`` when the short cluster ``tok`` contains an exec option:
    the rest of the cluster after it is its value (``-nOvim``, ``-xmake``)."""
    if tok.startswith("--") or len(tok) < 2:
        return None
    for pos, letter in enumerate(tok[1:], 1):
        option = f"-{letter}"
        if option in table:
            rest = tok[pos + 1 :]
            return option, (rest or None)
    return None


def _option_runs(sub: str, args: Sequence[Token]) -> Iterator[GitRun]:
    table = _EXEC_OPTIONS.get(sub)
    if not table:
        return
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if tok is None:
            yield GitRun(f"an argument of git {sub} is computed at run time")
            continue
        if tok == "--":
            return
        if not tok.startswith("-"):
            continue
        hit = _long_match(tok, table) or _short_match(tok, table)
        if hit is None:
            continue
        option, value = hit
        how = table[option]
        if value is None and how != "sh?":
            if i >= len(args):
                continue  # git itself refuses the missing value
            value = args[i]
            i += 1
        what = f"git {sub} {option}"
        if value is None and how == "sh?":
            yield GitRun(f"{what} runs the pager its configuration names")
        elif value is None:
            yield GitRun(f"{what} is given a value computed at run time")
        elif how in ("sh", "sh?"):
            yield GitRun(f"{what} runs a command", script=value)
        elif how == "prog":
            if value.startswith("/"):
                yield GitRun(f"{what} runs a program", argv=(value,))
        elif how == "dir":
            yield GitRun(f"{what} installs hooks from a directory the caller names")
        else:
            yield GitRun(f"{what} sets configuration, which can name a program to run")


def _config_runs(args: Sequence[Token]) -> Iterator[GitRun]:
    keys: list[Token] = []
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if tok is None:
            keys.append(None)
            continue
        if tok in ("-e", "--edit") or (tok.startswith("--ed") and "--edit".startswith(tok)):
            yield GitRun("git config --edit runs the editor")
            return
        if tok in _CONFIG_WITH_VALUE:
            i += 1
            continue
        if tok.startswith("-"):
            continue
        keys.append(tok)
    for key in keys:  # every word, values included: a key can follow ``set``/``--add``
        if key is None or key.lower().startswith(GIT_EXEC_KEYS):
            yield GitRun(f"git config {key or '$…'}: a key whose value git runs or loads code from")
            return


def git_runs(argv: Sequence[Token]) -> list[GitRun]:
    """Everything ``argv`` (a git command line) makes git execute besides git itself."""
    out = list(_global_runs(argv))
    sub, index = subcommand(argv)
    if sub is None:
        if index < len(argv):
            out.append(GitRun("git's subcommand is computed at run time"))
        return out
    args = argv[index + 1 :]
    if sub == "config":
        out.extend(_config_runs(args))
    elif sub == "submodule":
        words = [t for t in args if t is None or not t.startswith("-")]
        if words and words[0] == "foreach":
            rest = list(args[args.index("foreach") + 1 :])
            while rest and rest[0] is not None and rest[0].startswith("-"):
                rest.pop(0)  # --recursive, --quiet
            words_known = [t for t in rest if t is not None]
            if len(words_known) < len(rest):
                out.append(GitRun("git submodule foreach runs a command computed at run time"))
            elif rest:
                out.append(GitRun("git submodule foreach runs a command", " ".join(words_known)))
    elif sub == "bisect":
        words = list(args)
        if words and words[0] == "run" and len(words) > 1:
            out.append(GitRun("git bisect run runs a command", argv=tuple(words[1:])))
        elif words and words[0] is None:
            out.append(GitRun("git bisect's action is computed at run time"))
    else:
        runs = list(_option_runs(sub, args))
        out.extend(runs)
        # difftool -x runs the command given instead of a configured tool
        if sub in _TOOL_RUNNERS and not runs and "--tool-help" not in args:
            out.append(GitRun(_TOOL_RUNNERS[sub]))
    return out
