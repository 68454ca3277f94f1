"""Deciding one call against a stack of frames: allowed only if every frame allows it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .call import READ_KINDS, WRITE_KINDS, ToolAnnotations, ToolCall
from .command_paths import NamedPath, named_paths
from .commands import CommandRuleSet
from .decision import Decision, Outcome
from .frame import Frame
from .levels import SideEffectLevel
from .names import NameMatcher, canonical_name
from .network import DEFAULT_SCHEMES, DomainRule, HostError, parse_target, port_of
from .paths import PathContext, expand_pattern, make_context, resolve_target, sensitive_names
from .runs_later import judges, named_by, written_runs_later
from .shell import (
    CommandParseError,
    SimpleCommand,
    expand_argv,
    parse_command_line,
    redirect_targets,
)

_PATH_KINDS = READ_KINDS | WRITE_KINDS


class _Denied(Exception):
    def __init__(self, dimension: str, rule: str | None, reason: str, subject: str | None) -> None:
        self.dimension = dimension
        self.rule = rule
        self.reason = reason
        self.subject = subject

    def decision(self, tool: str, index: int, frame: Frame) -> Decision:
        """The typed denial, naming the frame at ``index`` that raised this."""
        return Decision(
            Outcome.DENY,
            tool,
            f"{self.reason} (frame '{frame.label}')",
            frame_index=index,
            frame_label=frame.label,
            frame_kind=frame.kind,
            dimension=self.dimension,
            rule=self.rule,
            subject=self.subject,
        )


def decide(
    call: ToolCall,
    frames: Sequence[Frame],
    *,
    context: PathContext | None = None,
) -> Decision:
    """Decide ``call`` against ``frames`` (bottom first). Deny wins; an empty stack allows."""
    if not frames:
        return Decision(Outcome.ALLOW, call.name, "no policy is active")
    subjects = _Subjects(call, context) if call.has_subjects else _NO_SUBJECTS
    if call.has_subjects:
        subjects.frames = frames
    key = _memo_key(call, frames, subjects)
    if key is not None:
        hit = _ALLOWED.get(key)
        if (
            hit is not None
            and hit[0] is frames
            and hit[1] is call.annotations
            and hit[3] is subjects._context
        ):
            return hit[2]
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        try:
            _check_frame(call, frame, subjects)
        except _Denied as denied:
            return denied.decision(call.name, index, frame)
    allowed = Decision(Outcome.ALLOW, call.name, _allowed_reason(len(frames)))
    if key is not None:
        if len(_ALLOWED) >= _MEMO_SIZE:
            _ALLOWED.clear()
        _ALLOWED[key] = (frames, call.annotations, allowed, subjects._context)
    return allowed


def _memo_key(call: ToolCall, frames: Sequence[Frame], subjects: _Subjects) -> Any:
    """The key of an allowed verdict that is a pure function of resolved paths, or ``None``.

    A call whose only arguments the policy reads are paths is decided by its name, its
    annotations, the frames, the context and the *resolved* targets (resolved here, on
    this call: resolutions are never reused). Frames are an immutable tuple (the stack),
    known by identity, so their policies are not hashed on every call. Commands, URLs,
    skills and members are left to the full check.
    """
    ann = call.annotations
    if not call.has_subjects or type(frames) is not tuple or not _paths_only(ann):
        return None
    try:
        paths = subjects.paths()
    except _Denied:
        return None  # the frame loop raises it again, naming the frame that checks it
    if not paths:
        return None
    if len(paths) == 1:
        targets: tuple[tuple[str, str], ...] = ((paths[0][1], paths[0][2]),)
    else:
        targets = tuple([(path[1], path[2]) for path in paths])  # (resolved, access)
    # the context by identity too (an entry holds it): a context's hash is a Python call
    return (id(frames), id(ann), id(subjects._context), call.name, call.mcp_server, targets)


def _paths_only(ann: ToolAnnotations) -> bool:
    """Whether paths are the only arguments the policy reads (memoised per annotations)."""
    hit = _PATHS_ONLY.get(id(ann))
    if hit is not None and hit[0] is ann:  # the entry holds ``ann``: its id is not reused
        return hit[1]
    only = not (ann.command_args or ann.url_args or ann.skill_args or ann.member_args)
    if len(_PATHS_ONLY) >= _MEMO_SIZE:
        _PATHS_ONLY.clear()
    _PATHS_ONLY[id(ann)] = (ann, only)
    return only


_PATHS_ONLY: dict[int, tuple[ToolAnnotations, bool]] = {}


#: Allowed verdicts by :func:`_memo_key`; each entry holds its frames, annotations and
#: context, so the ids in the key cannot be reused while it exists.
_ALLOWED: dict[Any, tuple[Sequence[Frame], ToolAnnotations, Decision, PathContext | None]] = {}


def _allowed_reason(count: int) -> str:
    return (
        _ALLOWED_REASONS[count]
        if count < len(_ALLOWED_REASONS)
        else f"allowed by all {count} frame(s)"
    )


_ALLOWED_REASONS = tuple(f"allowed by all {n} frame(s)" for n in range(32))


def decide_resource(dimension: str, name: str, frames: Sequence[Frame]) -> Decision:
    """Decide one named resource (``skills``, ``members``, ``mcp_servers``, ``capabilities``)."""
    if dimension not in ("skills", "members", "mcp_servers", "capabilities", "tools"):
        raise ValueError(f"unknown resource dimension {dimension!r}")
    subject = canonical_name(name)
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        try:
            _check_name(frame, dimension, subject)
        except _Denied as denied:
            return denied.decision(subject, index, frame)
    return Decision(Outcome.ALLOW, subject, f"allowed by all {len(frames)} frame(s)")


def decide_visibility(call: ToolCall, frames: Sequence[Frame]) -> Decision:
    """Whether a tool may be *offered* to the model at all: name, MCP server and level only.

    Arguments are not known before the model calls the tool, so path, command and
    network rules are left to :func:`decide` at dispatch; a tool that passes here can
    still be denied then.
    """
    if not frames:
        return Decision(Outcome.ALLOW, call.name, "no policy is active")
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        compiled = frame.policy.compiled
        try:
            name = call.name
            deny = compiled.tools_deny
            if deny is not None and deny.matches(name):
                _check_name(frame, "tools", name)
            for matcher in compiled.tools_allow:
                if not matcher.matches(name):
                    _check_name(frame, "tools", name)
            if call.mcp_server is not None and compiled.name_checked["mcp_servers"]:
                _check_name(frame, "mcp_servers", call.mcp_server)
            if compiled.ceiling is not None and call.level > compiled.ceiling:
                _deny_level(call, frame)
        except _Denied as denied:
            return denied.decision(call.name, index, frame)
    return Decision(Outcome.ALLOW, call.name, f"visible under all {len(frames)} frame(s)")


_SINGULAR = {
    "tools": "tool",
    "mcp_servers": "MCP server",
    "capabilities": "capability",
    "skills": "skill",
    "members": "delegation target",
}


def _check_name(frame: Frame, dimension: str, subject: str) -> None:
    compiled = frame.policy.compiled.names[dimension]
    what = _SINGULAR[dimension]
    if compiled.deny.matches(subject):
        rule = compiled.deny.first_match(subject)
        raise _Denied(
            dimension,
            f"{dimension}.deny: {rule}",
            f"{what} '{subject}' is denied by rule '{rule}'",
            subject,
        )
    for matcher in compiled.allow:
        if not matcher.matches(subject):
            raise _Denied(
                dimension, f"{dimension}.allow", _not_listed(what, subject, matcher), subject
            )


def _not_listed(
    what: str, subject: str, matcher: NameMatcher | None, listed: Sequence[str] = ()
) -> str:
    allowed = matcher.patterns if matcher is not None else tuple(listed)
    if not allowed:
        return f"{what} '{subject}' is not allowed: the allow list is empty"
    return f"{what} '{subject}' is not in the allow list ({_listing(allowed)})"


def _listing(items: Sequence[str], limit: int = 12) -> str:
    """A short, human listing of rules for reasons (receipts go to models: keep them small)."""
    if not items:
        return "nothing"
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f", ... ({more} more)" if more > 0 else "")


class _Subjects:
    """Per-call values shared by every frame: resolved paths, parsed commands, hosts."""

    __slots__ = ("_command_paths", "_commands", "_context", "_hosts", "_paths", "call", "frames")

    def __init__(self, call: ToolCall, context: PathContext | None) -> None:
        self.call = call
        self._context = context
        self.frames: Sequence[Frame] = ()
        self._paths: list[tuple[str, str, str, tuple[str, ...]]] | None = None
        self._commands: list[tuple[str, tuple[SimpleCommand, ...] | str]] | None = None
        self._hosts: list[tuple[str, str | None, str | None, str]] | None = None
        self._command_paths: list[_NamedTarget] | None = None

    @property
    def context(self) -> PathContext:
        if self._context is None:
            self._context = make_context()
        return self._context

    def paths(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """``(raw, resolved, access, sensitive names)``; raises for non-string arguments.

        Each argument is resolved afresh on every call (never cached: a link may have
        been swapped since the last one)."""
        if self._paths is None:
            out: list[tuple[str, str, str, tuple[str, ...]]] = []
            ctx = self._context or self.context
            arguments = self.call.arguments
            for arg, access in _accesses(self.call.annotations):
                value = arguments.get(arg)
                # a plain string, the usual argument, without building a list for it
                values = (value,) if type(value) is str and value.isascii() else None
                for raw in values or _values(arguments, arg, "paths"):
                    try:
                        resolved = resolve_target(raw, ctx)
                    except ValueError as exc:
                        raise _Denied("paths", None, f"argument '{arg}': {exc}", None) from None
                    out.append((raw, resolved, access, sensitive_names(resolved, ctx)))
            ann = self.call.annotations
            if not out and ann.kind in _NEEDS_PATH and ann.path_args:
                # a misspelt or missing path: whatever the handler would touch, the policy
                # never saw it (a handler taking **kwargs could read the misspelt key)
                given = ", ".join(sorted(map(str, self.call.arguments))) or "none"
                raise _Denied(
                    "paths",
                    None,
                    f"a {ann.kind} tool needs a path argument ({', '.join(ann.path_args)}); "
                    f"the call gives {given}",
                    None,
                )
            self._paths = out
        return self._paths

    def commands(self) -> list[tuple[str, tuple[SimpleCommand, ...] | str]]:
        """``(raw, commands)``, or ``(raw, error message)`` when the line cannot be analysed."""
        if self._commands is None:
            out: list[tuple[str, tuple[SimpleCommand, ...] | str]] = []
            for arg in self.call.annotations.command_args:
                value = self.call.arguments.get(arg)
                if value is None:
                    continue
                if isinstance(value, str) and not _is_text(value):
                    out.append((repr(value), f"argument '{arg}' is not valid UTF-8 text"))
                elif isinstance(value, str):
                    try:
                        out.append((value, parse_command_line(value)))
                    except CommandParseError as exc:
                        out.append((value, str(exc)))
                elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                    raw = " ".join(value)
                    try:
                        out.append((raw, expand_argv(value)))
                    except CommandParseError as exc:
                        out.append((raw, str(exc)))
                else:
                    out.append(
                        (repr(value), f"argument '{arg}' is not a command string or argv list")
                    )
            if not out and self.call.annotations.command_args:
                given = ", ".join(sorted(map(str, self.call.arguments))) or "none"
                out.append(
                    (
                        "",
                        "the call gives no command argument "
                        f"({', '.join(self.call.annotations.command_args)}; it gives {given})",
                    )
                )
            self._commands = out
        return self._commands

    def command_paths(self) -> list[_NamedTarget]:
        """Paths the command lines name to programs whose arguments are files
        (``charter.policy.command_paths``), resolved against the workspace and every
        directory an earlier ``cd``/``pushd`` of the line names; globs are expanded the way
        the shell would, now. A path computed at run time resolves to ``None``."""
        if self._command_paths is None:
            out: list[_NamedTarget] = []
            ctx = self.context
            for raw_line, parsed in self.commands():
                if isinstance(parsed, str):
                    continue  # unparseable lines are denied by the command rules or the sandbox
                bases = [ctx]
                try:
                    redirects = redirect_targets(raw_line) if self._is_line(raw_line) else ()
                except CommandParseError:
                    redirects = ()
                named_all = [NamedPath(p, access, "redirection") for access, p in redirects]
                for cmd in parsed:
                    if cmd.program in ("cd", "pushd") and len(cmd.argv) > 1:
                        target = cmd.argv[-1]
                        if target is not None and "\x00" not in target:
                            bases.append(make_context(resolve_target(target, ctx), ctx.home))
                        continue
                    named_all.extend(named_paths(cmd.argv))
                for named in named_all:
                    what = named.program
                    if named.path is None:
                        out.append(_NamedTarget(what, "$…", None, named.access, ()))
                        continue
                    if named.path in _STREAMS or named.path.startswith("/dev/fd/"):
                        continue  # the process's own streams, not files of the policy's
                    for base in _work_tree_top(ctx) if named.from_top else bases:
                        for raw in _expand(named.path, base):
                            try:
                                resolved = resolve_target(raw, base)
                            except ValueError:
                                continue
                            out.append(
                                _NamedTarget(
                                    what,
                                    raw,
                                    resolved,
                                    named.access,
                                    sensitive_names(resolved, ctx),
                                )
                            )
            self._command_paths = out
        return self._command_paths

    def _is_line(self, raw: str) -> bool:
        """Whether ``raw`` is a shell line the call gives as a string (an argv list has
        no redirections)."""
        args = self.call.arguments
        return any(args.get(arg) == raw for arg in self.call.annotations.command_args)

    def hosts(self) -> list[tuple[str, str | None, str | None, str]]:
        """``(raw, host or None, scheme or None, error)``."""
        if self._hosts is None:
            out: list[tuple[str, str | None, str | None, str]] = []
            for arg in self.call.annotations.url_args:
                for raw in _values(self.call.arguments, arg, "network"):
                    try:
                        host, scheme = parse_target(raw)
                        out.append((raw, host, scheme, ""))
                    except HostError as exc:
                        out.append((raw, None, None, str(exc)))
            self._hosts = out
        return self._hosts


_NO_SUBJECTS = _Subjects(ToolCall("-"), None)


class _NamedTarget(NamedTuple):
    """A path a command line names: the program, the word, its resolution, the access."""

    program: str
    raw: str
    resolved: str | None
    access: str
    sensitive: tuple[str, ...]


_GLOB_CHARS = frozenset("*?[")
#: Paths that are a process's own streams: never a file a rule is about.
_STREAMS = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_MAX_GLOB = 256


def _work_tree_top(ctx: PathContext) -> list[PathContext]:
    """The context of the git work tree holding the workspace (where ``REV:path`` is
    rooted), and the workspace's own when it is not in one (a path judged both ways
    costs nothing and misses neither)."""
    import os

    path = ctx.workspace
    while True:
        if os.path.lexists(os.path.join(path, ".git")):
            return [ctx] if path == ctx.workspace else [make_context(path, ctx.home), ctx]
        parent = os.path.dirname(path)
        if parent == path:
            return [ctx]
        path = parent


def _expand(word: str, ctx: PathContext) -> list[str]:
    """``word`` and, for a glob, what it matches now (at most ``_MAX_GLOB``) and its
    literal directory: the shell expands it when the line runs."""
    if not _GLOB_CHARS.intersection(word):
        return [word]
    import glob as globmod
    import itertools
    import os

    base = word if word.startswith(("/", "~")) else os.path.join(ctx.workspace, word)
    base = os.path.expanduser(base) if base.startswith("~") else base
    literal = []
    for part in base.split("/"):
        if _GLOB_CHARS.intersection(part):
            break
        literal.append(part)
    out = ["/".join(literal) or "/"]
    out.extend(itertools.islice(globmod.iglob(base, recursive=True), _MAX_GLOB))
    return out


def _accesses(ann: ToolAnnotations) -> tuple[tuple[str, str], ...]:
    """``ann.path_accesses()``, memoised per annotations object (tools keep theirs)."""
    hit = _ACCESSES.get(id(ann))
    if hit is not None and hit[0] is ann:  # the entry holds ``ann``: its id is not reused
        return hit[1]
    accesses = ann.path_accesses()
    if len(_ACCESSES) >= _MEMO_SIZE:
        _ACCESSES.clear()
    _ACCESSES[id(ann)] = (ann, accesses)
    return accesses


_ACCESSES: dict[int, tuple[ToolAnnotations, tuple[tuple[str, str], ...]]] = {}


#: Tool kinds that act on a path they must be given (search tools default to the root).
_NEEDS_PATH = frozenset({"read", "edit"})


def _is_text(value: str) -> bool:
    """Not a lone surrogate (invalid UTF-8 decoded with ``surrogateescape``)."""
    if value.isascii():  # answered from a flag of the string, without encoding it
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _values(arguments: Any, arg: str, dimension: str) -> list[str]:
    value = arguments.get(arg)
    if value is None:
        return []
    if isinstance(value, str):
        values = [value]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        values = list(value)
        if not values:
            return []
    else:
        values = []
    if values:
        for item in values:
            if not _is_text(item):
                raise _Denied(dimension, None, f"argument '{arg}' is not valid UTF-8 text", None)
        return values
    raise _Denied(
        dimension,
        None,
        f"argument '{arg}' must be a string or a list of strings to be checked",
        None,
    )


def _check_frame(call: ToolCall, frame: Frame, subjects: _Subjects) -> None:
    compiled = frame.policy.compiled
    name = call.name

    # tools: the hot path. Verdicts per name are memoised on the (immutable) compiled
    # policy; reasons are built only on denial.
    ok = compiled.tools_ok.get(name)
    if ok is None:
        ok = compiled.tools_verdict(name)
    if not ok:
        _check_name(frame, "tools", name)

    ceiling = compiled.ceiling
    if ceiling is not None and call.level > ceiling:
        _deny_level(call, frame)

    if not call.has_subjects and call.mcp_server is None and call.annotations.kind is None:
        return
    checked = compiled.name_checked
    ann = call.annotations
    server = call.mcp_server
    if server is not None and checked["mcp_servers"]:
        _check_name(frame, "mcp_servers", server)
    if ann.capabilities and checked["capabilities"]:
        for cap in ann.capabilities:
            _check_name(frame, "capabilities", canonical_name(cap))
    if ann.skill_args or ann.member_args:
        for dimension, args in (("skills", ann.skill_args), ("members", ann.member_args)):
            if args and checked[dimension]:
                for arg in args:
                    for value in _values(call.arguments, arg, dimension):
                        _check_name(frame, dimension, canonical_name(value))

    if ann.path_args or ann.read_path_args or ann.write_path_args:
        _check_paths(frame, subjects)
    elif compiled.paths_restricted and ann.kind in _PATH_KINDS:
        raise _Denied(
            "paths",
            None,
            f"tool '{name}' is a {ann.kind} tool but declares no path arguments, so the path "
            "rules cannot be enforced",
            None,
        )

    if compiled.commands_restricted:
        if ann.command_args:
            _check_commands(frame, compiled.commands_allow, compiled.commands_deny, subjects)
        elif ann.kind == "execute" and not compiled.commands_all:
            raise _Denied(
                "commands",
                None,
                f"tool '{name}' executes commands but declares no command argument, so the "
                "command rules cannot be enforced",
                None,
            )

    if ann.command_args:
        _check_command_paths(frame, subjects)

    if compiled.network_restricted:
        if ann.url_args:
            _check_network(frame, compiled.network_allow, compiled.network_deny, subjects)
        elif ann.kind == "fetch" and not compiled.network_all:
            raise _Denied(
                "network",
                None,
                f"tool '{name}' fetches from the network but declares no URL argument, so the "
                "network rules cannot be enforced",
                None,
            )


def _deny_level(call: ToolCall, frame: Frame) -> None:
    ceiling = frame.policy.side_effect_level
    assert ceiling is not None
    ann = call.annotations
    level = ann.effective_level
    how = "declares" if ann.side_effect_level is not None else "declares no level, so counts as"
    raise _Denied(
        "side_effect_level",
        f"side_effect_level <= {ceiling.label}",
        f"tool '{call.name}' {how} side-effect level {level.label}, above the ceiling "
        f"{ceiling.label}",
        level.label,
    )


def _check_paths(frame: Frame, subjects: _Subjects) -> None:
    policy = frame.policy
    compiled = policy.compiled
    ctx = subjects.context
    for raw, resolved, access, sensitive in subjects.paths():
        for name in sensitive:
            if name not in policy.allow_sensitive:
                raise _Denied(
                    "paths",
                    f"sensitive: {name}",
                    f"path '{raw}' is sensitive ({name}); a policy must lift it explicitly with "
                    f'allow_sensitive = ["{name}"]',
                    resolved,
                )
        if not compiled.paths_restricted:
            continue
        key = (ctx, access, resolved)
        if key in compiled.paths_ok:
            continue
        check = compiled.path_check(ctx, access)
        dim = f"paths.{access}"
        if check.deny is not None:
            hit = check.deny.first_match(resolved)
            if hit is not None:
                raise _Denied(
                    dim,
                    f"paths.deny: {hit}",
                    f"{access} of path '{raw}' is denied by rule '{hit}'",
                    resolved,
                )
        for group, allow in zip(check.rules.allow, check.allow, strict=True):
            if not allow.matches(resolved):
                raise _Denied(
                    dim,
                    "paths.allow",
                    f"{access} of path '{raw}' (resolved to {resolved}) is outside the allowed "
                    f"paths ({_listing(group)})",
                    resolved,
                )
        if access == "write" and judges(frame, subjects.frames or (frame,)):
            _check_runs_later(raw, resolved, check.rules.allow, ctx)
        if len(compiled.paths_ok) >= _MEMO_SIZE:
            compiled.paths_ok.clear()  # bounded: recent targets stay fast
        compiled.paths_ok.add(key)


_MEMO_SIZE = 4096


def _check_runs_later(
    raw: str, resolved: str, allow: tuple[tuple[str, ...], ...], ctx: PathContext
) -> None:
    """A frame that restricts paths lets a file that runs later (``.git/config``,
    ``.envrc``, ``.vscode/``: :mod:`charter.policy.runs_later`) be written only when each
    of its allow groups names it by exact name: otherwise a write tool, which runs on the
    host, could plant what the user's next command runs outside any sandbox."""
    hit = written_runs_later(resolved)
    if hit is None:
        return
    root, entry = hit

    def literal(pattern: str) -> str:
        return expand_pattern(pattern, ctx)[0]

    if allow and all(named_by(root, group, literal) for group in allow):
        return
    raise _Denied(
        "paths.write",
        f"runs later: {entry.pattern}",
        f"write of path '{raw}' is refused: {root} runs later, outside any sandbox "
        f"({entry.why}); a policy allows it only by naming it in paths.allow "
        f'(e.g. "{root}")',
        resolved,
    )


def _check_command_paths(frame: Frame, subjects: _Subjects) -> None:
    """The paths a command line names (``cat secrets/x``, ``git show HEAD:secrets/x``),
    judged like a file tool's: sensitive names and ``paths.deny`` always (defence in
    depth under the sandbox), the allow lists too in a frame that says ``sandbox = "off"``
    (nothing else holds that shell to them)."""
    policy = frame.policy
    compiled = policy.compiled
    restricted = compiled.paths_restricted
    unsandboxed = policy.sandbox == "off"
    if not restricted and not unsandboxed and _no_sensitive(subjects):
        return
    ctx = subjects.context
    for named in subjects.command_paths():
        if named.resolved is None:
            if unsandboxed:  # the sensitive defaults at least cannot be checked
                raise _Denied(
                    "paths",
                    None,
                    f"'{named.program}' is given a path computed at run time, which cannot be "
                    'checked, and the policy runs shells with sandbox = "off"',
                    None,
                )
            continue
        for name in named.sensitive:
            if name not in policy.allow_sensitive:
                raise _Denied(
                    "paths",
                    f"sensitive: {name}",
                    f"'{named.program}' names path '{named.raw}', which is sensitive ({name}); "
                    f'a policy must lift it explicitly with allow_sensitive = ["{name}"]',
                    named.resolved,
                )
        if not restricted:
            continue
        check = compiled.path_check(ctx, named.access)
        dim = f"paths.{named.access}"
        if check.deny is not None:
            hit = check.deny.first_match(named.resolved)
            if hit is not None:
                raise _Denied(
                    dim,
                    f"paths.deny: {hit}",
                    f"'{named.program}' names path '{named.raw}' ({named.access}), denied by "
                    f"rule '{hit}'",
                    named.resolved,
                )
        if not unsandboxed:
            continue
        for group, allow in zip(check.rules.allow, check.allow, strict=True):
            if not allow.matches(named.resolved):
                raise _Denied(
                    dim,
                    "paths.allow",
                    f"'{named.program}' names path '{named.raw}' (resolved to "
                    f"{named.resolved}), outside the allowed paths ({_listing(group)}); "
                    'the policy runs shells with sandbox = "off"',
                    named.resolved,
                )
        if named.access == "write" and judges(frame, subjects.frames or (frame,)):
            # no sandbox keeps files that run later read-only to this shell: the policy does
            _check_runs_later(named.raw, named.resolved, check.rules.allow, ctx)


def _no_sensitive(subjects: _Subjects) -> bool:
    return not any(named.sensitive for named in subjects.command_paths())


def _check_commands(
    frame: Frame,
    allow: tuple[CommandRuleSet, ...],
    deny: CommandRuleSet,
    subjects: _Subjects,
) -> None:
    for raw, parsed in subjects.commands():
        if isinstance(parsed, str):
            raise _Denied("commands", None, f"command '{raw}' cannot be checked: {parsed}", raw)
        if deny:
            for cmd in parsed:
                rule = deny.denying(cmd)
                if rule is not None:
                    raise _Denied(
                        "commands",
                        f"commands.deny: {rule.text}",
                        f"command '{cmd.display()}' is denied by rule '{rule.text}'",
                        cmd.display(),
                    )
        for group in allow:
            for cmd in parsed:
                if cmd.transparent:
                    continue
                if cmd.program is None:
                    raise _Denied(
                        "commands",
                        "commands.allow",
                        f"command '{cmd.display()}' runs a program chosen at run time"
                        + (f" ({cmd.why})" if cmd.why else ""),
                        cmd.display(),
                    )
                if not group.allowing(cmd):
                    raise _Denied(
                        "commands",
                        "commands.allow",
                        f"command '{cmd.display()}' is not allowed "
                        f"(allowed: {_listing([r.text for r in group.rules])})",
                        cmd.display(),
                    )


def _check_network(
    frame: Frame,
    allow: tuple[tuple[DomainRule, ...], ...],
    deny: tuple[DomainRule, ...],
    subjects: _Subjects,
) -> None:
    ported = any(r.port is not None for r in deny) or any(
        r.port is not None for group in allow for r in group
    )
    for raw, host, scheme, error in subjects.hosts():
        if host is None:
            raise _Denied("network", None, error, raw)
        port = port_of(raw) if ported else None
        for rule in deny:
            if rule.matches(host, scheme, deny=True, port=port):
                raise _Denied(
                    "network",
                    f"network.deny: {rule.text}",
                    f"host '{host}' is denied by rule '{rule.text}'",
                    host,
                )
        named = bool(allow) and all(
            any(rule.matches(host, scheme, port=port) for rule in group) for group in allow
        )
        if scheme is not None and scheme not in DEFAULT_SCHEMES and not named:
            raise _Denied(
                "network",
                "network.allow" if allow else "network.deny",
                f"scheme '{scheme}' is not allowed for '{host}' (a rule must name it, "
                f"e.g. {scheme}://{host}; rules without a scheme cover http and https)",
                raw,
            )
        for group in allow:
            if not any(rule.matches(host, scheme, port=port) for rule in group):
                listed = _listing([r.text for r in group])
                raise _Denied(
                    "network",
                    "network.allow",
                    f"host '{host}' is not allowed (allowed: {listed})",
                    host,
                )


def level_of(value: str | SideEffectLevel) -> SideEffectLevel:
    return SideEffectLevel.parse(value)
