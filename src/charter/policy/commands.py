"""Command rules (``git:*``, ``npm test``, ``rm -rf:*``) and how they match.

Allow rules match strictly: the program and the rule's words must be the command's
leading words, exactly; ``:*`` (or a trailing `` *``) admits further arguments.
Deny rules match loosely, because that is the fail-closed direction: the program
must match (case-insensitively, by basename), the rule's flags must all be present
anywhere (short clusters split, so ``rm -fr`` and ``rm -r -f`` meet ``rm -rf``; the
common long spellings ``--recursive``/``--force`` count as ``-r``/``-f``), and the
rule's other words must appear in order. Other spellings of the same act
(``git push --force-with-lease``, ``--mirror``, ``+main``) come from a per-program
table of equivalences. A deny rule also matches a command with
run-time values (``rm $FLAGS x``) that could hide the denied words.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from dataclasses import dataclass

from .shell import SimpleCommand


#: How a bare program name resolves to a file (PATH lookup); tests inject their own.
def _which(name: str) -> str | None:
    import shutil  # here: shutil imports bz2 and lzma, milliseconds on every cold launch

    return shutil.which(name)


program_resolver: Callable[[str], str | None] = _which


def same_binary(argv0: str, name: str) -> bool:
    """Whether ``argv0`` (written with a path) is the binary PATH resolves ``name`` to.

    ``/tmp/x/git`` or ``./git`` is not ``git``: an allow rule names a program, not any
    file that happens to carry its name. Relative paths depend on a directory chosen at
    run time and never match.
    """
    if not os.path.isabs(argv0):
        return False
    found = program_resolver(name)
    if found is None:
        return False
    return os.path.realpath(found) == os.path.realpath(argv0)


_LONG_TO_SHORT = {"--recursive": "-r", "--force": "-f"}

#: Spellings of the same act, per program and subcommand: an option (or ``+`` for a
#: positional that starts with ``+``) that means the same as a canonical flag. A rule
#: denying ``git push --force`` denies every way of forcing a push.
_EQUIVALENTS: dict[str, dict[str, dict[str, str]]] = {
    "git": {
        "push": {
            "--force-with-lease": "-f",
            "--force-if-includes": "-f",
            "--mirror": "-f",
            "+": "-f",  # ``git push origin +main`` force-pushes main
        },
    },
}


@dataclass(frozen=True, slots=True)
class CommandRule:
    """One parsed command rule."""

    text: str
    program: str
    words: tuple[str, ...]
    prefix: bool

    @classmethod
    def parse(cls, text: str) -> CommandRule:
        raw = text.strip()
        if not raw:
            raise ValueError("a command rule cannot be blank")
        prefix = False
        if raw.endswith(":*"):
            prefix, raw = True, raw[:-2].rstrip()
        elif raw == "*":
            return cls(text, "*", (), True)
        elif raw.endswith(" *"):
            prefix, raw = True, raw[:-2].rstrip()
        parts = raw.split()
        if not parts:
            raise ValueError(f"command rule {text!r} names no program")
        return cls(text, parts[0], tuple(parts[1:]), prefix)

    def allows(self, cmd: SimpleCommand) -> bool:
        """Strict match for allow lists."""
        if self.program == "*":
            return True
        program = cmd.program
        if program is None or not fnmatch.fnmatchcase(program, self.program):
            return False
        first = cmd.argv[0]
        if first is not None and first != program and not same_binary(first, program):
            return False
        args = cmd.argv[1:]
        if len(args) < len(self.words) or (not self.prefix and len(args) != len(self.words)):
            return False
        for tok, word in zip(args, self.words, strict=False):
            if tok is None or not fnmatch.fnmatchcase(tok, word):
                return False
        return True

    def denies(self, cmd: SimpleCommand) -> bool:
        """Loose match for deny lists."""
        if self.program == "*":
            return True
        program = cmd.program
        if program is None:
            return True  # the program itself is computed at run time
        if not fnmatch.fnmatch(program.lower(), self.program.lower()):
            return False
        if not self.words:
            return True
        if cmd.dynamic:
            return True
        flags: set[str] = set()
        positionals: list[str] = []
        for tok in cmd.argv[1:]:
            assert tok is not None
            low = tok.lower()
            if low.startswith("--"):
                name = low.split("=", 1)[0]
                flags.add(_LONG_TO_SHORT.get(name, name))
            elif low.startswith("-") and len(low) > 1:
                flags.update("-" + ch for ch in low[1:])
            else:
                positionals.append(low)
        for sub, table in _EQUIVALENTS.get(program.lower(), {}).items():
            if sub in positionals:
                for spelling, canonical in table.items():
                    if spelling in flags or (
                        spelling == "+" and any(p.startswith("+") for p in positionals)
                    ):
                        flags.add(canonical)
        pos = 0
        for word in self.words:
            low = word.lower()
            if low.startswith("--"):
                if _LONG_TO_SHORT.get(low, low) not in flags:
                    return False
            elif low.startswith("-") and len(low) > 1:
                if not all("-" + ch in flags for ch in low[1:]):
                    return False
            else:
                while pos < len(positionals) and not fnmatch.fnmatch(positionals[pos], low):
                    pos += 1
                if pos >= len(positionals):
                    return False
                pos += 1
        return True


_GLOB = frozenset("*?[")


class CommandRuleSet:
    """Rules indexed by program so a check costs a dict lookup, not a scan of every rule."""

    __slots__ = ("_exact", "_folded", "_globbed", "rules")

    def __init__(self, rules: tuple[CommandRule, ...]) -> None:
        self.rules = rules
        self._exact: dict[str, list[CommandRule]] = {}
        self._folded: dict[str, list[CommandRule]] = {}
        self._globbed: list[CommandRule] = []
        for rule in rules:
            if any(ch in _GLOB for ch in rule.program):
                self._globbed.append(rule)
            else:
                self._exact.setdefault(rule.program, []).append(rule)
                self._folded.setdefault(rule.program.lower(), []).append(rule)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def allowing(self, cmd: SimpleCommand) -> bool:
        """Whether some rule allows ``cmd`` (strict match)."""
        program = cmd.program
        if program is not None:
            for rule in self._exact.get(program, ()):
                if rule.allows(cmd):
                    return True
        return any(rule.allows(cmd) for rule in self._globbed)

    def denying(self, cmd: SimpleCommand) -> CommandRule | None:
        """The first rule that denies ``cmd`` (loose match), if any."""
        program = cmd.program
        if program is None:
            return self.rules[0] if self.rules else None
        for rule in self._folded.get(program.lower(), ()):
            if rule.denies(cmd):
                return rule
        for rule in self._globbed:
            if rule.denies(cmd):
                return rule
        return None
