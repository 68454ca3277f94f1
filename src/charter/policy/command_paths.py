"""The paths a command line names, for the programs whose arguments are known to be files.

The sandbox is what holds a shell to the path rules; this is defence in depth, and the
whole of it under ``sandbox = "off"``: ``cat secrets/token.txt``, ``cp ~/.ssh/id_rsa x``,
``sed -i ... .git/config`` and ``git show HEAD:secrets/token.txt`` name their files in the
command line, so the policy judges those names like a ``read``/``write`` tool's path
arguments.

Only programs whose argument grammar is known are read (a table below, by access); an
unknown program's words are not paths to this module (``python3 -c ...`` is the sandbox's).
Options are skipped; ``--opt=value`` values and every operand are taken as paths (a false
candidate such as ``-n 5``'s ``5`` resolves inside the workspace and matches no deny rule).
A word computed at run time (``cat $F``) is reported as ``None``: undecidable.

git is read for the paths it prints blobs of: ``REV:path`` and ``:path`` object names in
``show``/``cat-file``/``diff``/``log``/``grep``/``archive``/``blame``..., and their
pathspecs; ``cat-file --batch`` (object names on stdin) is undecidable.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

Token = str | None

READ = "read"
WRITE = "write"

#: Programs that read every operand.
_READERS = frozenset(
    {
        "cat", "tac", "nl", "head", "tail", "less", "more", "wc", "od", "xxd", "hexdump",
        "strings", "base64", "base32", "basenc", "md5sum", "sha1sum", "sha224sum",
        "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "sum", "file", "stat",
        "diff", "cmp", "comm", "paste", "join", "fold", "fmt", "expand", "unexpand", "rev",
        "column", "iconv", "bat", "batcat", "view", "zcat", "zless", "zmore", "bzcat",
        "xzcat", "zstdcat", "lzcat", "ls", "du", "tree", "source", ".", "sort", "uniq",
        "cut", "pr", "split", "csplit", "look", "vim", "vi", "nano", "emacs", "ed",
    }
)  # fmt: skip
#: Programs that write (create, change or remove) every operand.
_WRITERS = frozenset(
    {
        "rm", "rmdir", "unlink", "touch", "mkdir", "truncate", "shred", "tee", "mv", "ln",
        "chmod", "chown", "chgrp", "mkfifo", "mknod", "setfacl", "chattr",
    }
)  # fmt: skip
#: Programs whose last operand (or ``-t DIR``) is written and the others read.
_COPIERS = frozenset({"cp", "install", "rsync", "scp"})
#: Programs whose first operand is a pattern or script, not a file (unless ``-e``/``-f``
#: give it); ``sed -i`` writes its files.
_SCRIPTED = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "sed", "awk", "gawk", "mawk", "nawk", "jq", "yq"}
)
#: Options of the scripted programs that give the script/pattern (the next word, or
#: attached), after which every operand is a file; ``-f`` names a file it reads.
_SCRIPT_OPTS = frozenset({"-e", "--regexp", "--expression"})
_SCRIPT_FILE_OPTS = frozenset({"-f", "--file"})

#: git subcommands that print file content (blobs, diffs, archives) or restore it.
_GIT_CONTENT = frozenset(
    {
        "show", "cat-file", "diff", "log", "whatchanged", "format-patch", "grep", "archive",
        "blame", "annotate", "difftool", "checkout", "restore", "stash", "range-diff",
        "ls-tree", "cherry", "shortlog",
    }
)  # fmt: skip
_GIT_WRITES = frozenset({"checkout", "restore"})
_GIT_GLOBAL_WITH_VALUE = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix"}
)


@dataclass(frozen=True, slots=True)
class NamedPath:
    """A path a command names: ``path`` (``None`` when computed at run time), ``access``,
    and ``program`` for the reason."""

    path: str | None
    access: str
    program: str
    #: The path is relative to the repository's top directory (git's ``REV:path``), not to
    #: the directory the command runs in.
    from_top: bool = False


def named_paths(argv: Sequence[Token]) -> list[NamedPath]:
    """The file paths ``argv`` names, for programs whose grammar is known (else ``[]``)."""
    if not argv or argv[0] is None:
        return []
    program = argv[0].rsplit("/", 1)[-1]
    args = argv[1:]
    if program == "git":
        return list(_git_paths(args))
    if program == "dd":
        return [
            NamedPath(tok.split("=", 1)[1], READ if tok.startswith("if=") else WRITE, "dd")
            for tok in args
            if tok is not None and tok.startswith(("if=", "of="))
        ]
    if program in _READERS:
        return [NamedPath(p, READ, program) for p in _operands(args)]
    if program in _WRITERS:
        ops = _operands(args)
        if program in ("chmod", "chown", "chgrp", "setfacl", "chattr") and ops:
            ops = ops[1:]  # the mode, owner or ACL
        return [NamedPath(p, WRITE, program) for p in ops]
    if program in _COPIERS:
        return list(_copier_paths(program, args))
    if program in _SCRIPTED:
        return list(_scripted_paths(program, args))
    return []


def _operands(args: Sequence[Token]) -> list[Token]:
    out: list[Token] = []
    options = True
    for tok in args:
        if tok is None:
            out.append(None)
        elif options and tok == "--":
            options = False
        elif options and tok.startswith("--") and "=" in tok:
            out.append(tok.split("=", 1)[1])
        elif options and tok.startswith("-") and tok != "-":
            continue
        elif tok != "-":
            out.append(tok)
    return out


def _copier_paths(program: str, args: Sequence[Token]) -> Iterator[NamedPath]:
    target: Token = None
    has_target = False
    rest: list[Token] = []
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if tok in ("-t", "--target-directory") and i < len(args):
            target, has_target = args[i], True
            i += 1
        elif tok is not None and tok.startswith("--target-directory="):
            target, has_target = tok.split("=", 1)[1], True
        else:
            rest.append(tok)
    ops = _operands(rest)
    if not has_target and ops:
        target, ops = ops[-1], ops[:-1]
        has_target = True
    for path in ops:
        yield NamedPath(path, READ, program)
    if has_target:
        yield NamedPath(target, WRITE, program)


def _scripted_paths(program: str, args: Sequence[Token]) -> Iterator[NamedPath]:
    access = READ
    script_given = False
    files: list[Token] = []
    i = 0
    options = True
    while i < len(args):
        tok = args[i]
        i += 1
        if tok is None:
            files.append(None)
            continue
        if options and tok == "--":
            options = False
            continue
        if options and tok.startswith("-") and tok != "-":
            name, eq, value = tok.partition("=")
            if program == "sed" and (tok.startswith("-i") or name == "--in-place"):
                access = WRITE
                continue
            if name in _SCRIPT_OPTS or (not tok.startswith("--") and tok[:2] in _SCRIPT_OPTS):
                script_given = True
                if (not eq and len(tok) == 2) or tok in _SCRIPT_OPTS:
                    i += 1  # the script/pattern is the next word
                continue
            if name in _SCRIPT_FILE_OPTS or (not tok.startswith("--") and tok[:2] == "-f"):
                script_given = True
                if eq:
                    files.append(value)
                elif len(tok) > 2 and not tok.startswith("--"):
                    files.append(tok[2:])
                elif i < len(args):
                    files.append(args[i])
                    i += 1
                continue
            if eq:
                files.append(value)
            continue
        files.append(tok)
    if not script_given and files:
        files = files[1:]  # the pattern or script
    for path in files:
        yield NamedPath(path, access, program)


def _object_path(tok: str) -> str | None:
    """The path of an object name ``REV:path``, ``:path`` or ``:N:path`` (``None`` for a
    commit search ``:/text``, a URL, or a name without a path)."""
    if ":" not in tok or tok.startswith(":/") or "://" in tok:
        return None
    if tok.startswith(":"):
        rest = tok[1:]
        if len(rest) > 1 and rest[0] in "0123" and rest[1] == ":":
            rest = rest[2:]  # a stage number
        return rest or None
    return tok.split(":", 1)[1] or None


def _git_paths(args: Sequence[Token]) -> Iterator[NamedPath]:
    i = 0
    while i < len(args):
        tok = args[i]
        if tok is None:
            return
        if tok in _GIT_GLOBAL_WITH_VALUE:
            i += 2
            continue
        if tok.startswith("-"):
            i += 1
            continue
        break
    else:
        return
    sub = args[i]
    if sub not in _GIT_CONTENT:
        return
    access = WRITE if sub in _GIT_WRITES else READ
    rest = args[i + 1 :]
    if sub == "cat-file" and any(
        t is not None and t.startswith(("--batch", "--batch-command")) and t != "--batch-check"
        for t in rest
    ):
        yield NamedPath(None, READ, "git cat-file --batch (object names from stdin)")
        return
    pattern_pending = sub == "grep" and not any(
        t in ("-e", "-f", "--file") or (t or "").startswith(("-e", "--regexp")) for t in rest
    )
    options = True
    for tok in rest:
        if tok is None:
            yield NamedPath(None, access, f"git {sub}")
            continue
        if options and tok == "--":
            options = False
            continue
        if options and tok.startswith("-"):
            continue
        if pattern_pending:
            pattern_pending = False
            continue
        named = _object_path(tok)
        if named is not None:
            # ``REV:path`` is relative to the top of the work tree, ``REV:./path`` to the
            # current directory (gitrevisions(7))
            relative = named.startswith(("./", "../"))
            yield NamedPath(named, READ, f"git {sub}", from_top=not relative)
        elif ":" not in tok:
            # a revision or a pathspec: git tells them apart by the repository; judged as a
            # path (a revision name matches no deny rule unless it is one)
            yield NamedPath(tok, access, f"git {sub}")
