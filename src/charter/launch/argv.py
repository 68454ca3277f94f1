"""Argument layering: persona defaults, then user arguments, then policy arguments.

User arguments are split with the CLI's flag table (which flags take a value, which are
variadic) so that a flag is recognised in every spelling: aliases, short forms, attached
short values (``-sread-only``) and ``=`` forms. When a policy exists, every flag that
could override it is filtered out of the defaults and the user arguments. Policy
arguments come last (before a user ``--``), in ``--flag=value`` form, so no variadic
flag can swallow the user's prompt and the policy's value is the one that wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .clis import NONE, ONE, OPTIONAL, VARIADIC, CliSpec, Flag


@dataclass(frozen=True, slots=True)
class ArgItem:
    """A flag with its values, a positional word, or the ``--`` terminator and what follows."""

    tokens: tuple[str, ...]
    flag: Flag | None = None
    value: str | None = None  # the flag's (first) value, when it has one
    terminator: bool = False

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


@dataclass(frozen=True, slots=True)
class Filtered:
    """A default or user argument dropped because it could override the policy."""

    source: str  # "defaults" or "user"
    tokens: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "args": list(self.tokens), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Layered:
    defaults: tuple[str, ...]
    user: tuple[str, ...]
    policy: tuple[str, ...]
    final: tuple[str, ...]
    filtered: tuple[Filtered, ...]


def _is_option(token: str) -> bool:
    if len(token) < 2 or not token.startswith("-"):
        return False
    return not token[1:].replace(".", "", 1).isdigit()  # -1, -0.5 are values


def split_args(spec: CliSpec, args: Sequence[str]) -> list[ArgItem]:
    """Split ``args`` into items using the CLI's flag table."""
    items: list[ArgItem] = []
    i = 0
    n = len(args)
    while i < n:
        tok = args[i]
        if tok == "--":
            items.append(ArgItem(tuple(args[i:]), terminator=True))
            break
        if not _is_option(tok):
            items.append(ArgItem((tok,)))
            i += 1
            continue
        if tok.startswith("--") and "=" in tok:
            name, _, value = tok.partition("=")
            items.append(ArgItem((tok,), spec.flag(name), value))
            i += 1
            continue
        flag = spec.flag(tok)
        if flag is None and not tok.startswith("--") and len(tok) > 2:
            short = spec.flag(tok[:2])
            if short is not None and short.arity in (ONE, OPTIONAL, VARIADIC):
                items.append(ArgItem((tok,), short, tok[2:]))
                i += 1
                continue
        if flag is None or flag.arity == NONE:
            items.append(ArgItem((tok,), flag))
            i += 1
            continue
        if flag.arity == ONE:
            take = args[i + 1 : i + 2]
        elif flag.arity == OPTIONAL:
            take = args[i + 1 : i + 2] if i + 1 < n and not _is_option(args[i + 1]) else []
            if take == ["--"]:
                take = []
        else:  # VARIADIC
            j = i + 1
            while j < n and args[j] != "--" and not _is_option(args[j]):
                j += 1
            take = list(args[i + 1 : j])
        items.append(ArgItem((tok, *take), flag, take[0] if take else None))
        i += 1 + len(take)
    return items


def config_key(value: str | None) -> str:
    """The key of a ``key=value`` config override."""
    return (value or "").partition("=")[0].strip()


def controlled(item: ArgItem, active: Callable[[str], bool]) -> str | None:
    """Why ``item`` is policy-controlled (a reason), or ``None``."""
    flag = item.flag
    if flag is None or flag.controls is None or not active(flag.controls):
        return None
    if flag.controlled_keys:
        key = config_key(item.value)
        for prefix in flag.controlled_keys:
            if key == prefix or key.startswith(prefix + "."):
                return f"{flag.canonical} {prefix}* is set by the policy"
        return None
    what = "" if flag.controls == "any" else f" ({flag.controls} are restricted)"
    return f"{flag.canonical} could override the policy{what}"


def _drop_empty(items: list[ArgItem]) -> list[ArgItem]:
    return [it for it in items if it.flag is not None or it.terminator or any(it.tokens)]


def layer(
    spec: CliSpec,
    defaults: Sequence[str],
    user: Sequence[str],
    policy: Sequence[str],
    *,
    filtering: bool,
    active: Callable[[str], bool],
) -> Layered:
    """Build the final argv tail: defaults, filtered user args, then policy args."""
    filtered: list[Filtered] = []
    kept: dict[str, list[ArgItem]] = {}
    for source, args in (("defaults", defaults), ("user", user)):
        out: list[ArgItem] = []
        for item in _drop_empty(split_args(spec, args)):
            reason = controlled(item, active) if filtering else None
            if reason is not None:
                filtered.append(Filtered(source, item.tokens, reason))
            else:
                out.append(item)
        kept[source] = out
    # A user flag overrides the same single-valued flag in the persona's defaults.
    user_flags = {
        it.flag.canonical
        for it in kept["user"]
        if it.flag is not None and it.flag.arity != VARIADIC and not it.flag.controlled_keys
    }
    default_items = [
        it for it in kept["defaults"] if it.flag is None or it.flag.canonical not in user_flags
    ]
    d = tuple(t for it in default_items for t in it.tokens)
    u_items = kept["user"]
    u = tuple(t for it in u_items for t in it.tokens)
    p = tuple(t for t in policy if t)
    head = [t for it in u_items if not it.terminator for t in it.tokens]
    tail = [t for it in u_items if it.terminator for t in it.tokens]
    final = (*d, *head, *p, *tail)
    return Layered(d, u, p, final, tuple(filtered))
