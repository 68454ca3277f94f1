"""Deciding one call against a stack of frames: allowed only if every frame allows it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .call import READ_KINDS, WRITE_KINDS, ToolCall
from .commands import CommandRule
from .decision import Decision, Outcome
from .frame import Frame
from .levels import SideEffectLevel
from .model import Rules
from .names import NameMatcher, canonical_name
from .network import DomainRule, HostError, host_of
from .paths import PathContext, compile_paths, make_context, resolve_target, sensitive_matchers
from .shell import CommandParseError, SimpleCommand, expand_argv, parse_command_line

_PATH_KINDS = READ_KINDS | WRITE_KINDS


class _Denied(Exception):
    def __init__(self, dimension: str, rule: str | None, reason: str, subject: str | None) -> None:
        self.dimension = dimension
        self.rule = rule
        self.reason = reason
        self.subject = subject


def decide(
    call: ToolCall,
    frames: Sequence[Frame],
    *,
    context: PathContext | None = None,
) -> Decision:
    """Decide ``call`` against ``frames`` (bottom first). Deny wins; an empty stack allows."""
    if not frames:
        return Decision(Outcome.ALLOW, call.name, "no policy is active")
    subjects = _Subjects(call, context)
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        try:
            _check_frame(call, frame, subjects)
        except _Denied as denied:
            return Decision(
                Outcome.DENY,
                call.name,
                f"{denied.reason} (frame '{frame.label}')",
                frame_index=index,
                frame_label=frame.label,
                frame_kind=frame.kind,
                dimension=denied.dimension,
                rule=denied.rule,
                subject=denied.subject,
            )
    return Decision(Outcome.ALLOW, call.name, f"allowed by all {len(frames)} frame(s)")


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
            return Decision(
                Outcome.DENY,
                subject,
                f"{denied.reason} (frame '{frame.label}')",
                frame_index=index,
                frame_label=frame.label,
                frame_kind=frame.kind,
                dimension=denied.dimension,
                rule=denied.rule,
                subject=subject,
            )
    return Decision(Outcome.ALLOW, subject, f"allowed by all {len(frames)} frame(s)")


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
    shown = ", ".join(allowed[:12]) + (", ..." if len(allowed) > 12 else "")
    return f"{what} '{subject}' is not in the allow list ({shown})"


class _Subjects:
    """Per-call values shared by every frame: resolved paths, parsed commands, hosts."""

    __slots__ = ("_commands", "_context", "_hosts", "_paths", "_sensitive", "call")

    def __init__(self, call: ToolCall, context: PathContext | None) -> None:
        self.call = call
        self._context = context
        self._paths: list[tuple[str, str, str]] | None = None
        self._commands: list[tuple[str, tuple[SimpleCommand, ...] | str]] | None = None
        self._hosts: list[tuple[str, str | None, str]] | None = None
        self._sensitive: dict[str, tuple[str, ...]] | None = None

    @property
    def context(self) -> PathContext:
        if self._context is None:
            self._context = make_context()
        return self._context

    def paths(self) -> list[tuple[str, str, str]]:
        """``(raw, resolved, access)``; raises for non-string path arguments."""
        if self._paths is None:
            out: list[tuple[str, str, str]] = []
            for arg, access in self.call.annotations.path_accesses():
                for raw in _values(self.call.arguments, arg, "paths"):
                    out.append((raw, resolve_target(raw, self.context), access))
            self._paths = out
        return self._paths

    def sensitive(self, resolved: str) -> tuple[str, ...]:
        if self._sensitive is None:
            self._sensitive = {}
        hit = self._sensitive.get(resolved)
        if hit is None:
            hit = tuple(
                name
                for name, matcher in sensitive_matchers(self.context)
                if matcher.matches(resolved)
            )
            self._sensitive[resolved] = hit
        return hit

    def commands(self) -> list[tuple[str, tuple[SimpleCommand, ...] | str]]:
        """``(raw, commands)``, or ``(raw, error message)`` when the line cannot be analysed."""
        if self._commands is None:
            out: list[tuple[str, tuple[SimpleCommand, ...] | str]] = []
            for arg in self.call.annotations.command_args:
                value = self.call.arguments.get(arg)
                if value is None:
                    continue
                if isinstance(value, str):
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
            self._commands = out
        return self._commands

    def hosts(self) -> list[tuple[str, str | None, str]]:
        """``(raw, host or None, error)``."""
        if self._hosts is None:
            out: list[tuple[str, str | None, str]] = []
            for arg in self.call.annotations.url_args:
                for raw in _values(self.call.arguments, arg, "network"):
                    try:
                        out.append((raw, host_of(raw), ""))
                    except HostError as exc:
                        out.append((raw, None, str(exc)))
            self._hosts = out
        return self._hosts


def _values(arguments: Any, arg: str, dimension: str) -> list[str]:
    value = arguments.get(arg)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _Denied(
        dimension,
        None,
        f"argument '{arg}' must be a string or a list of strings to be checked",
        None,
    )


def _check_frame(call: ToolCall, frame: Frame, subjects: _Subjects) -> None:
    policy = frame.policy
    compiled = policy.compiled
    names = compiled.names
    ann = call.annotations
    name = call.name

    # tools
    tools = names["tools"]
    if tools.deny.patterns or tools.allow:
        _check_name(frame, "tools", name)

    # MCP server
    server = call.mcp_server
    if server is not None and (names["mcp_servers"].deny.patterns or names["mcp_servers"].allow):
        _check_name(frame, "mcp_servers", server)

    # side-effect ceiling
    ceiling = policy.side_effect_level
    if ceiling is not None:
        level = ann.effective_level
        if level > ceiling:
            how = (
                "declares"
                if ann.side_effect_level is not None
                else "declares no level, so counts as"
            )
            raise _Denied(
                "side_effect_level",
                f"side_effect_level <= {ceiling.label}",
                f"tool '{name}' {how} side-effect level {level.label}, above the ceiling "
                f"{ceiling.label}",
                level.label,
            )

    # capabilities, skills, members
    if ann.capabilities:
        for cap in ann.capabilities:
            _check_name(frame, "capabilities", canonical_name(cap))
    for dimension, args in (("skills", ann.skill_args), ("members", ann.member_args)):
        if not args or not (names[dimension].deny.patterns or names[dimension].allow):
            continue
        for arg in args:
            for value in _values(call.arguments, arg, dimension):
                _check_name(frame, dimension, canonical_name(value))

    # paths
    if ann.path_args or ann.read_path_args or ann.write_path_args:
        _check_paths(frame, subjects)
    elif policy.paths.restricted and ann.kind in _PATH_KINDS:
        raise _Denied(
            "paths",
            None,
            f"tool '{name}' is a {ann.kind} tool but declares no path arguments, so the path "
            "rules cannot be enforced",
            None,
        )

    # commands
    if policy.commands.restricted:
        if ann.command_args:
            _check_commands(frame, compiled.commands_allow, compiled.commands_deny, subjects)
        elif ann.kind == "execute" and not _allows_everything(policy.commands):
            raise _Denied(
                "commands",
                None,
                f"tool '{name}' executes commands but declares no command argument, so the "
                "command rules cannot be enforced",
                None,
            )

    # network
    if policy.network.restricted:
        if ann.url_args:
            _check_network(frame, compiled.network_allow, compiled.network_deny, subjects)
        elif ann.kind == "fetch" and not _allows_everything(policy.network):
            raise _Denied(
                "network",
                None,
                f"tool '{name}' fetches from the network but declares no URL argument, so the "
                "network rules cannot be enforced",
                None,
            )


def _allows_everything(rules: Rules) -> bool:
    """``allow = ["*"]`` with no deny: nothing to check, so no argument is needed."""
    return not rules.deny and all("*" in group for group in rules.allow)


def _check_paths(frame: Frame, subjects: _Subjects) -> None:
    policy = frame.policy
    ctx = subjects.context
    for raw, resolved, access in subjects.paths():
        for name in subjects.sensitive(resolved):
            if name not in policy.allow_sensitive:
                raise _Denied(
                    "paths",
                    f"sensitive: {name}",
                    f"path '{raw}' is sensitive ({name}); a policy must lift it explicitly with "
                    f'allow_sensitive = ["{name}"]',
                    resolved,
                )
        rules: Rules = policy.paths.for_access(access)
        if not rules.restricted:
            continue
        dim = f"paths.{access}"
        if rules.deny:
            deny = compile_paths(rules.deny, ctx, True)
            hit = deny.first_match(resolved)
            if hit is not None:
                raise _Denied(
                    dim,
                    f"paths.deny: {hit}",
                    f"{access} of path '{raw}' is denied by rule '{hit}'",
                    resolved,
                )
        for group in rules.allow:
            allow = compile_paths(group, ctx, False)
            if not allow.matches(resolved):
                listed = ", ".join(group) if group else "nothing"
                raise _Denied(
                    dim,
                    "paths.allow",
                    f"{access} of path '{raw}' (resolved to {resolved}) is outside the allowed "
                    f"paths ({listed})",
                    resolved,
                )


def _check_commands(
    frame: Frame,
    allow: tuple[tuple[CommandRule, ...], ...],
    deny: tuple[CommandRule, ...],
    subjects: _Subjects,
) -> None:
    for raw, parsed in subjects.commands():
        if isinstance(parsed, str):
            raise _Denied("commands", None, f"command '{raw}' cannot be checked: {parsed}", raw)
        for cmd in parsed:
            for rule in deny:
                if rule.denies(cmd):
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
                        f"command '{cmd.display()}' runs a program chosen at run time",
                        cmd.display(),
                    )
                if not any(rule.allows(cmd) for rule in group):
                    listed = ", ".join(r.text for r in group) if group else "nothing"
                    raise _Denied(
                        "commands",
                        "commands.allow",
                        f"command '{cmd.display()}' is not allowed (allowed: {listed})",
                        cmd.display(),
                    )


def _check_network(
    frame: Frame,
    allow: tuple[tuple[DomainRule, ...], ...],
    deny: tuple[DomainRule, ...],
    subjects: _Subjects,
) -> None:
    for raw, host, error in subjects.hosts():
        if host is None:
            raise _Denied("network", None, error, raw)
        for rule in deny:
            if rule.matches(host):
                raise _Denied(
                    "network",
                    f"network.deny: {rule.text}",
                    f"host '{host}' is denied by rule '{rule.text}'",
                    host,
                )
        for group in allow:
            if not any(rule.matches(host) for rule in group):
                listed = ", ".join(r.text for r in group) if group else "nothing"
                raise _Denied(
                    "network",
                    "network.allow",
                    f"host '{host}' is not allowed (allowed: {listed})",
                    host,
                )


def level_of(value: str | SideEffectLevel) -> SideEffectLevel:
    return SideEffectLevel.parse(value)
