"""Shell command lines to simple commands, the way a shell would run them.

A line is parsed with tree-sitter's bash grammar (a maintained, real parser, not a
regex), every command anywhere in it is collected (``a && b``, pipes, ``$(...)``,
backticks, subshells, functions) and each is unwrapped through launchers such as
``env``, ``timeout``, ``sudo``, ``xargs`` or ``bash -c '...'`` so that the command that
really runs is what gets judged. A line that does not parse is an error; callers
deny on it (fail closed).
"""

from __future__ import annotations

import codecs
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from charter.errors import CharterError

from .git_exec import git_runs

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

#: An argv token; ``None`` marks a token whose value is only known at run time.
Token = str | None

_MAX_DEPTH = 8


class CommandParseError(CharterError, ValueError):
    """The command line cannot be analysed with certainty."""


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command that the line would execute.

    ``transparent`` marks launchers (``timeout``, ``nice``, ``bash -c`` ...) that only run
    the command after them: they need no allow rule of their own, but deny rules still
    see them.
    """

    argv: tuple[Token, ...]
    transparent: bool = False
    #: Why the program cannot be known, when charter could not read the line that far.
    why: str | None = field(default=None, compare=False)
    #: The basename of ``argv[0]``, or ``None`` when it is computed at run time.
    program: str | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        first = self.argv[0] if self.argv else None
        program = None if first is None else (os.path.basename(first) or first)
        object.__setattr__(self, "program", program)

    @property
    def dynamic(self) -> bool:
        return any(tok is None for tok in self.argv)

    def display(self) -> str:
        return " ".join("$…" if tok is None else tok for tok in self.argv)


_local = threading.local()


def _parser() -> Parser:
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        parser = Parser(Language(tree_sitter_bash.language()))
        _local.parser = parser
    return parser


def parse_command_line(line: str) -> tuple[SimpleCommand, ...]:
    """All simple commands ``line`` would run, wrappers unwrapped. Raises on bad input."""
    return _parse_cached(line, 0)


def expand_argv(argv: Sequence[str]) -> tuple[SimpleCommand, ...]:
    """Like :func:`parse_command_line` for an argv that needs no shell parsing."""
    return tuple(_unwrap(tuple(argv), 0))


@lru_cache(maxsize=4096)
def _parse_cached(line: str, depth: int) -> tuple[SimpleCommand, ...]:
    if depth > _MAX_DEPTH:
        raise CommandParseError("command nests shells too deeply to analyse")
    if "\x00" in line:
        raise CommandParseError("command contains a NUL byte")
    data = line.encode("utf-8", "surrogatepass")
    tree = _parser().parse(data)
    root = tree.root_node
    if root.has_error:
        raise CommandParseError("command line does not parse as shell")
    found: list[SimpleCommand] = []
    extras = _redirect_extras(root)
    for node in _walk(root):
        if node.type in ("command", "declaration_command"):
            for child in node.children:
                if child.type == "variable_assignment" and _runs_programs(child):
                    # ``GIT_SSH_COMMAND='rm -rf x' git push``: the value is a program
                    # chosen by the caller, judged as one chosen at run time.
                    found.append(SimpleCommand((None, _text(child))))
        if node.type == "command":
            argv = _command_argv(node, extras.get(node.id, ()))
            if argv:
                found.extend(_unwrap(argv, depth))
        elif node.type in ("heredoc_body", "heredoc_redirect") and depth == 0:
            continue
    return tuple(found)


@lru_cache(maxsize=1024)
def redirect_targets(line: str, depth: int = 0) -> tuple[tuple[str, Token], ...]:
    """``(access, path)`` of every file a shell line's redirections open (``< f`` reads,
    ``> f``, ``>> f``, ``&> f``, ``>| f`` write), also inside the scripts it hands to
    ``bash -c``/``sh -c`` (through launchers) and ``eval``; duplications (``2>&1``) are not
    files. Raises :class:`CommandParseError` like :func:`parse_command_line`."""
    if depth > _MAX_DEPTH:
        raise CommandParseError("command nests shells too deeply to analyse")
    if "\x00" in line:
        raise CommandParseError("command contains a NUL byte")
    root = _parser().parse(line.encode("utf-8", "surrogatepass")).root_node
    if root.has_error:
        raise CommandParseError("command line does not parse as shell")
    out: list[tuple[str, Token]] = []
    for node in _walk(root):
        if node.type != "file_redirect":
            continue
        ops = [c.type for c in node.children if c.type not in ("file_descriptor", "ERROR")]
        op = ops[0] if ops else ""
        if "&" in op and op not in ("&>", "&>>"):
            continue  # >& 1, <& 0: another descriptor
        destinations = list(node.children_by_field_name("destination"))
        if destinations:
            out.append(("read" if op == "<" else "write", _literal(destinations[0])))
    for cmd in _parse_cached(line, depth):
        if not cmd.transparent:
            continue
        script: str | _Unknown | None = None
        if cmd.program in _SHELLS:
            script = _shell_script(cmd.argv)
        elif cmd.program == "eval" and all(t is not None for t in cmd.argv[1:]):
            script = " ".join(t for t in cmd.argv[1:] if t is not None)
        if isinstance(script, str):
            out.extend(redirect_targets(script, depth + 1))
    return tuple(out)


#: Environment variables that make an allowed program run another one (or load code).
_EXEC_VARS = frozenset(
    {
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "BROWSER",
        "PATH",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "IFS",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "LESSOPEN",
        "LESSCLOSE",
        "CDPATH",
    }
)
#: ``GIT_*`` variables that only label commits; every other one can redirect git.
_SAFE_GIT_VARS = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
        "GIT_TERMINAL_PROMPT",
    }
)


def exec_var(name: str) -> bool:
    """Whether setting ``name`` can make a program execute something else."""
    upper = name.upper()
    if upper.startswith("GIT_"):
        return upper not in _SAFE_GIT_VARS
    return upper in _EXEC_VARS


def _runs_programs(assignment: Node) -> bool:
    name = assignment.child_by_field_name("name")
    return name is not None and exec_var(_text(name))


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _extra_words(redirect: Node) -> list[Node]:
    if redirect.type != "file_redirect":
        return []
    return list(redirect.children_by_field_name("destination"))[1:]


def _redirect_extras(root: Node) -> dict[int, list[Node]]:
    """Words the grammar files under a redirect that the kernel sees as arguments.

    ``cmd >f a b`` runs ``cmd a b``; tree-sitter-bash hangs ``a b`` on the redirect as
    extra destinations, and for ``x && cmd >f a`` on a redirect of the whole list. They
    belong to the rightmost command before the redirect (as bash binds them).
    """
    out: dict[int, list[Node]] = {}
    for node in _walk(root):
        if node.type != "redirected_statement":
            continue
        words = [w for r in node.children_by_field_name("redirect") for w in _extra_words(r)]
        body = node.child_by_field_name("body")
        if not words or body is None:
            continue
        last: Node | None = None
        for inner in _walk(body):
            if inner.type == "command" and (last is None or inner.end_byte > last.end_byte):
                last = inner
        if last is not None:
            out.setdefault(last.id, []).extend(words)
    return out


def _command_argv(node: Node, extra: Sequence[Node] = ()) -> tuple[Token, ...]:
    name = node.child_by_field_name("name")
    if name is None:
        return ()
    argv: list[Token] = [_literal(name)]
    for arg in node.children_by_field_name("argument"):
        argv.append(_literal(arg))
    for redirect in node.children_by_field_name("redirect"):
        argv.extend(_literal(arg) for arg in _extra_words(redirect))
    argv.extend(_literal(arg) for arg in extra)
    return tuple(argv)


def _text(node: Node) -> str:
    raw = node.text
    return raw.decode("utf-8", "surrogateescape") if raw is not None else ""


def _unescape_word(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _unescape_double(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`\n':
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_DYNAMIC = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
    }
)


def _literal(node: Node) -> Token:
    kind = node.type
    if kind == "command_name":
        return _literal(node.children[0]) if node.children else None
    if kind in ("word", "number"):
        text = _text(node)
        if text == "~" or text.startswith("~/"):
            # the home directory: what ``resolve_target`` and the sandbox take ``~`` to be,
            # so path rules see ``cat ~/.ssh/id_rsa`` (a word with a path never matches a
            # bare-name allow rule, so ``~/bin/git`` is not ``git``)
            return text
        if text.startswith("~"):
            return None  # another user's home, chosen at run time
        return _unescape_word(text)
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "ansi_c_string":
        try:
            return codecs.decode(_text(node)[2:-1], "unicode_escape")
        except UnicodeDecodeError:
            return None
    if kind == "string":
        if any(child.type in _DYNAMIC for child in node.children):
            return None
        return _unescape_double(_text(node)[1:-1])
    if kind == "concatenation":
        parts = [_literal(child) for child in node.children]
        if any(part is None for part in parts):
            return None
        return "".join(p for p in parts if p is not None)
    return None


# -- wrappers -------------------------------------------------------------------------

_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "fish", "busybox-sh"})

# Options that take a separate value, per launcher.
_OPTS_WITH_VALUE: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "setsid": frozenset(),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "ionice": frozenset({"-c", "--class", "-n", "--classdata", "-p", "--pid"}),
    "unbuffer": frozenset(),
    "sudo": frozenset(
        {
            "-u",
            "--user",
            "-g",
            "--group",
            "-C",
            "--close-from",
            "-D",
            "--chdir",
            "-R",
            "--chroot",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-r",
            "--role",
            "-t",
            "--type",
            "-U",
            "--other-user",
            "-T",
            "--command-timeout",
        }
    ),
    "doas": frozenset({"-u", "-C"}),
    "runuser": frozenset({"-u", "--user", "-g", "--group", "-G", "--supp-group"}),
    "xargs": frozenset(
        {
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            # -e, -i and -l take an optional value attached to them only (``-i{}``):
            # ``xargs -i rm`` runs rm, so they are flags here.
            "-E",
            "-I",
            "-L",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
        }
    ),
    "strace": frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-O", "-S", "-P", "-I"}),
    "ltrace": frozenset({"-o", "-e", "-p", "-s", "-u", "-a", "-n"}),
    # ``-d``/``--differences`` take an optional attached value only (``-d=permanent``).
    "watch": frozenset({"-n", "--interval", "-q"}),
    "flock": frozenset({"-w", "--wait", "--timeout", "-E", "--conflict-exit-code"}),
    "chroot": frozenset({"--userspec", "--groups"}),
    "taskset": frozenset(),
    "chrt": frozenset(),
    "nsenter": frozenset({"-t", "--target", "-S", "--setuid", "-G", "--setgid"}),
    "firejail": frozenset(),
}

# Options that take no value, per launcher (from each program's manual). With the table
# above this is the launcher's whole grammar: an option in neither is one charter cannot
# read, so the program the launcher runs is unknown (denied under an allow list).
_FLAGS: dict[str, frozenset[str]] = {
    "env": frozenset(
        {
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
            "-",
            "--block-signal",
            "--default-signal",
            "--ignore-signal",
            "--list-signal-handling",
        }
    ),
    "timeout": frozenset({"--preserve-status", "--foreground", "-v", "--verbose"}),
    "nice": frozenset(),
    "nohup": frozenset(),
    "time": frozenset(
        {"-p", "--portability", "-v", "--verbose", "-a", "--append", "-q", "--quiet"}
    ),
    "command": frozenset({"-p", "-v", "-V"}),
    "builtin": frozenset(),
    "exec": frozenset({"-c", "-l"}),
    "setsid": frozenset({"-c", "--ctty", "-f", "--fork", "-w", "--wait"}),
    "stdbuf": frozenset(),
    "ionice": frozenset({"-t", "--ignore"}),
    "unbuffer": frozenset({"-p"}),
    "sudo": frozenset(
        {
            "-A",
            "--askpass",
            "-b",
            "--background",
            "-B",
            "--bell",
            "-E",
            "--preserve-env",
            "-H",
            "--set-home",
            "-i",
            "--login",
            "-K",
            "--remove-timestamp",
            "-k",
            "--reset-timestamp",
            "-N",
            "--no-update",
            "-n",
            "--non-interactive",
            "-P",
            "--preserve-groups",
            "-S",
            "--stdin",
            "-s",
            "--shell",
        }
    ),
    "doas": frozenset({"-n", "-s"}),
    "runuser": frozenset({"-l", "--login", "-m", "-p", "--preserve-environment"}),
    "xargs": frozenset(
        {
            "-0",
            "--null",
            "-e",
            "--eof",
            "-i",
            "--replace",
            "-l",
            "--max-lines",
            "-o",
            "--open-tty",
            "-p",
            "--interactive",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-x",
            "--exit",
        }
    ),
    "strace": frozenset(
        {
            "-f",
            "-ff",
            "-c",
            "-C",
            "-d",
            "-D",
            "-F",
            "-i",
            "-k",
            "-q",
            "-qq",
            "-r",
            "-t",
            "-tt",
            "-ttt",
            "-T",
            "-v",
            "-w",
            "-x",
            "-xx",
            "-y",
            "-yy",
            "-z",
            "-Z",
            "-n",
        }
    ),
    "ltrace": frozenset({"-f", "-c", "-C", "-i", "-r", "-S", "-t", "-tt", "-ttt", "-T", "-b"}),
    "watch": frozenset(
        {
            "-b",
            "--beep",
            "-c",
            "--color",
            "-C",
            "--no-color",
            "-d",
            "--differences",
            "-e",
            "--errexit",
            "-g",
            "--chgexit",
            "-p",
            "--precise",
            "-t",
            "--no-title",
            "-w",
            "--no-wrap",
            "-x",
            "--exec",
        }
    ),
    "flock": frozenset(
        {
            "-s",
            "--shared",
            "-x",
            "-e",
            "--exclusive",
            "-u",
            "--unlock",
            "-n",
            "--nb",
            "--nonblock",
            "-o",
            "--close",
            "-F",
            "--no-fork",
            "--verbose",
        }
    ),
    "chroot": frozenset({"--skip-chdir"}),
    "taskset": frozenset({"-a", "--all-tasks", "-p", "--pid", "-c", "--cpu-list"}),
    "chrt": frozenset(
        {
            "-a",
            "--all-tasks",
            "-b",
            "--batch",
            "-d",
            "--deadline",
            "-f",
            "--fifo",
            "-i",
            "--idle",
            "-o",
            "--other",
            "-r",
            "--rr",
            "-R",
            "--reset-on-fork",
            "-p",
            "--pid",
            "-m",
            "--max",
            "-v",
            "--verbose",
        }
    ),
    "nsenter": frozenset(
        {
            "-a",
            "--all",
            "-m",
            "--mount",
            "-u",
            "--uts",
            "-i",
            "--ipc",
            "-n",
            "--net",
            "-p",
            "--pid",
            "-U",
            "--user",
            "-C",
            "--cgroup",
            "-T",
            "--time",
            "-r",
            "--root",
            "-w",
            "--wd",
            "-F",
            "--no-fork",
            "--preserve-credentials",
            "-Z",
            "--follow-context",
        }
    ),
    "firejail": frozenset(),  # every firejail option is --name or --name=value
}

# Short options whose value may be attached (``xargs -i{}``, ``stdbuf -oL``, ``nsenter -t1``).
_ATTACHED_OPTIONAL = {"xargs": ("-e", "-i", "-l"), "watch": ("-d",)}


class _UnknownOption(Exception):
    def __init__(self, option: str) -> None:
        super().__init__(option)
        self.option = option


def _known_option(program: str, tok: str) -> int:
    """How many tokens a launcher option takes (1 or 2); raise for an option it lacks."""
    with_value = _OPTS_WITH_VALUE[program]
    flags = _FLAGS.get(program, frozenset())
    if tok in with_value:
        return 2
    if tok in flags:
        return 1
    if tok.startswith("--"):
        name = tok.split("=", 1)[0]
        if program == "firejail" or ("=" in tok and (name in with_value or name in flags)):
            return 1
        raise _UnknownOption(tok)
    if program == "nice" and tok[1:].isdigit():
        return 1  # nice -10: the historical adjustment spelling
    if tok[:2] in with_value or tok[:2] in _ATTACHED_OPTIONAL.get(program, ()):
        return 1  # a value attached to a short option
    # a cluster of short flags (``-fT``), the last of which may take the next token
    letters = [f"-{c}" for c in tok[1:]]
    if all(flag in flags for flag in letters[:-1]):
        if letters[-1] in flags:
            return 1
        if letters[-1] in with_value:
            return 2
    raise _UnknownOption(tok)


# Launchers that change privilege or confinement must be allowed in their own right.
_PRIVILEGED = frozenset({"sudo", "doas", "su", "runuser", "chroot", "nsenter", "pkexec"})

# Builtins that run nothing and touch nothing by themselves need no allow rule.
_NO_OP_BUILTINS = frozenset({"cd", "pushd", "popd", "true", "false", ":"})

# Positional arguments a launcher consumes before the command.
_LEADING_POSITIONALS: dict[str, int] = {
    "timeout": 1,
    "taskset": 1,
    "chrt": 1,
    "chroot": 1,
    "flock": 1,
}


def _unwrap(argv: tuple[Token, ...], depth: int) -> Iterator[SimpleCommand]:
    if depth > _MAX_DEPTH:
        raise CommandParseError("command nests launchers too deeply to analyse")
    first = argv[0] if argv else None
    program = os.path.basename(first) if first else None
    if program is None:
        yield SimpleCommand(argv)
        return
    if program in _SHELLS:
        script = _shell_script(argv)
        if script is not None:
            yield SimpleCommand(argv, transparent=True)
            if script is _UNKNOWN:
                yield SimpleCommand((program, None))
                return
            assert isinstance(script, str)
            yield from _parse_cached(script, depth + 1)
            return
        yield SimpleCommand(argv)
        return
    if program == "eval":
        yield SimpleCommand(argv, transparent=True)
        if any(tok is None for tok in argv[1:]):
            yield SimpleCommand((None,))
            return
        yield from _parse_cached(" ".join(t for t in argv[1:] if t is not None), depth + 1)
        return
    if program == "su":
        yield SimpleCommand(argv)
        script = _option_value(argv, ("-c", "--command"))
        if script is _UNKNOWN:
            yield SimpleCommand((None,))
        elif isinstance(script, str):
            yield from _parse_cached(script, depth + 1)
        return
    if program in _NO_OP_BUILTINS:
        yield SimpleCommand(argv, transparent=True)
        return
    if program == "git":
        yield SimpleCommand(argv)
        yield from _git_inner(argv, depth)
        return
    if program == "find":
        yield SimpleCommand(argv)
        yield from _find_exec(argv, depth)
        return
    if program in _OPTS_WITH_VALUE:
        try:
            inner = _launcher_inner(program, argv)
        except _UnknownOption as exc:
            yield SimpleCommand(argv, transparent=program not in _PRIVILEGED)
            yield SimpleCommand(
                (None,),
                why=f"{program} option '{exc.option}' is not in charter's table of {program}'s "
                "options, so the program it runs cannot be known",
            )
            return
        if program == "env":
            split = _option_value(argv, ("-S", "--split-string"))
            if split is _UNKNOWN:
                yield SimpleCommand(argv)
                yield SimpleCommand((None,))
                return
            if isinstance(split, str):
                yield SimpleCommand(argv, transparent=True)
                yield from _parse_cached(split, depth + 1)
                return
        if program == "watch" and inner:
            yield SimpleCommand(argv, transparent=True)
            if any(tok is None for tok in inner):
                yield SimpleCommand((None,))
                return
            yield from _parse_cached(" ".join(t for t in inner if t is not None), depth + 1)
            return
        if program == "flock":
            script = _option_value(argv, ("-c", "--command"))
            if isinstance(script, str):
                yield SimpleCommand(argv, transparent=True)
                yield from _parse_cached(script, depth + 1)
                return
        if inner:
            yield SimpleCommand(argv, transparent=program not in _PRIVILEGED)
            if program == "xargs":
                # xargs appends arguments read from stdin: unknown at analysis time.
                inner = (*inner, None)
            yield from _unwrap(inner, depth + 1)
            return
    yield SimpleCommand(argv)


class _Unknown:
    pass


_UNKNOWN = _Unknown()


# Shell options that take a separate value (``bash --rcfile FILE -c ...``).
_SHELL_OPTS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _shell_script(argv: tuple[Token, ...]) -> str | _Unknown | None:
    """The script of ``sh -c SCRIPT`` (``None`` when the shell runs a file or stdin).

    As bash reads it: options come first (``-c`` is a flag, ``-c -x`` and ``-c --`` are
    legal), and the script is the first operand after them.
    """
    args = argv[1:]
    command_mode = False
    i = 0
    while i < len(args):
        tok = args[i]
        if tok is None:
            return _UNKNOWN
        if tok == "--" or tok == "-":
            i += 1
            break
        if tok in _SHELL_OPTS_WITH_VALUE:
            i += 2
            continue
        if tok.startswith("--"):
            i += 1
            continue
        if tok.startswith(("-", "+")) and len(tok) > 1:
            if tok.startswith("-") and "c" in tok[1:]:
                command_mode = True
            i += 1
            continue
        break
    if not command_mode:
        return None
    if i >= len(args):
        return _UNKNOWN
    script = args[i]
    return _UNKNOWN if script is None else script


def _option_value(argv: tuple[Token, ...], names: tuple[str, ...]) -> str | _Unknown | None:
    for i, tok in enumerate(argv[1:], start=1):
        if tok is None:
            continue
        for name in names:
            if tok == name:
                if i + 1 >= len(argv) or argv[i + 1] is None:
                    return _UNKNOWN
                return argv[i + 1]
            if len(name) == 2 and tok.startswith(name) and len(tok) > 2:
                return tok[2:]  # ``-S'rm -rf x'``: the value attached to a short option
            if name.startswith("--") and tok.startswith(name + "="):
                return tok[len(name) + 1 :]
    return None


def _launcher_inner(program: str, argv: tuple[Token, ...]) -> tuple[Token, ...]:
    positionals = _LEADING_POSITIONALS.get(program, 0)
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok is None:
            if positionals:
                positionals -= 1
                i += 1
                continue
            return argv[i:]
        if tok == "--":
            i += 1
            break
        if program == "env" and "=" in tok and not tok.startswith("-"):
            if exec_var(tok.split("=", 1)[0]):
                return (None, tok)  # env PAGER=... runs a program chosen by the caller
            i += 1
            continue
        if program == "nice" and tok.startswith("-") and tok[1:].lstrip("-").isdigit():
            i += 1
            continue
        if tok.startswith("-") and len(tok) > 1:
            i += _known_option(program, tok)
            continue
        if positionals:
            positionals -= 1
            i += 1
            continue
        break
    return argv[i:]


def _find_exec(argv: tuple[Token, ...], depth: int) -> Iterator[SimpleCommand]:
    i = 1
    while i < len(argv):
        if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+"):
                j += 1
            inner = argv[i + 1 : j]
            if inner:
                yield from _unwrap(inner, depth + 1)
            i = j + 1
            continue
        i += 1


def _git_inner(argv: tuple[Token, ...], depth: int) -> Iterator[SimpleCommand]:
    """What git is told to run, judged as the program it is (``git_exec`` reads git's
    option grammar): a command line, an argv, or a program chosen at run time."""
    for run in git_runs(argv):
        if run.script is not None:
            yield from _parse_cached(run.script, depth + 1)
        elif run.argv is not None:
            yield from _unwrap(run.argv, depth + 1)
        else:
            yield SimpleCommand((None, *argv[1:]), why=run.why)
