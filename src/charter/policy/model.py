"""The immutable capability policy and its plain-dict form (the seeds' "CapabilityPolicy dict")."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from .commands import CommandRule, CommandRuleSet
from .errors import PolicyError, PolicyIssue
from .levels import SideEffectLevel
from .names import NameMatcher, canonical_name
from .network import DomainRule, HostError
from .paths import SENSITIVE_PATHS, PathContext, PathMatcher, compile_paths

#: Name dimensions, in the order decisions check them.
NAME_DIMENSIONS: tuple[str, ...] = ("tools", "mcp_servers", "capabilities", "skills", "members")

_DIM_ALIASES: dict[str, str] = {
    "tools": "tools",
    "paths": "paths",
    "network": "network",
    "commands": "commands",
    "bash": "commands",
    "shell": "commands",
    "mcp_servers": "mcp_servers",
    "mcpServers": "mcp_servers",
    "mcps": "mcp_servers",
    "skills": "skills",
    "members": "members",
    "capabilities": "capabilities",
}
_TOP_KEYS = (*_DIM_ALIASES, "side_effect_level", "allow_sensitive", "sandbox", "name")
#: Values of ``sandbox``: ``"auto"`` (default: sandbox when the policy restricts paths or
#: network, refuse when no sandbox can be made) or ``"off"`` (the explicit opt-out).
SANDBOX_MODES = ("auto", "off")
_RULE_KEYS = ("allow", "deny", "allow_all_of")
_CAPABILITY = re.compile(r"^[a-z0-9_*?\[\]-]+\.[a-z0-9_*?\[\]-]+$")


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True, slots=True)
class Rules:
    """Allow/deny patterns of one dimension.

    ``allow`` is a conjunction of allow lists: a subject must match *every* list (this is
    what intersecting policies produces). ``allow == ()`` places no restriction; an
    allow list that is itself empty (``((),)``) allows nothing.
    """

    allow: tuple[tuple[str, ...], ...] = ()
    deny: tuple[str, ...] = ()

    @property
    def restricted(self) -> bool:
        return bool(self.allow or self.deny)

    @property
    def allows_nothing(self) -> bool:
        """Nothing passes: a ``*`` deny rule or an explicitly empty allow list."""
        return "*" in self.deny or any(len(group) == 0 for group in self.allow)

    def intersect(self, other: Rules) -> Rules:
        allow = tuple(dict.fromkeys(self.allow + other.allow))
        return Rules(allow, _dedupe(self.deny + other.deny))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if len(self.allow) == 1:
            out["allow"] = list(self.allow[0])
        elif self.allow:
            out["allow_all_of"] = [list(group) for group in self.allow]
        if self.deny:
            out["deny"] = list(self.deny)
        return out


@dataclass(frozen=True, slots=True)
class PathRules:
    """Path rules for all access (``any``) and, additionally, per access kind."""

    any: Rules = Rules()
    read: Rules = Rules()
    write: Rules = Rules()

    @property
    def restricted(self) -> bool:
        return self.any.restricted or self.read.restricted or self.write.restricted

    def for_access(self, access: str) -> Rules:
        """The rules a ``read`` or ``write`` access must satisfy."""
        return self.any.intersect(self.read if access == "read" else self.write)

    def intersect(self, other: PathRules) -> PathRules:
        return PathRules(
            self.any.intersect(other.any),
            self.read.intersect(other.read),
            self.write.intersect(other.write),
        )

    def to_dict(self) -> dict[str, Any]:
        out = self.any.to_dict()
        for kind, rules in (("read", self.read), ("write", self.write)):
            if rules.restricted:
                out[kind] = rules.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class CompiledNames:
    allow: tuple[NameMatcher, ...]
    deny: NameMatcher


class CompiledPolicy:
    """Matchers and flags built once per policy, so the hot path is lookups, not parsing.

    Path matchers depend on the workspace, so they are built per :class:`PathContext`
    on first use and kept.
    """

    __slots__ = (
        "_path_cache",
        "ceiling",
        "commands_all",
        "commands_allow",
        "commands_deny",
        "commands_restricted",
        "name_checked",
        "names",
        "network_all",
        "network_allow",
        "network_deny",
        "network_restricted",
        "paths",
        "paths_ok",
        "paths_restricted",
        "tools_allow",
        "tools_deny",
        "tools_ok",
    )

    def __init__(self, policy: Policy) -> None:
        self.names = {
            dim: CompiledNames(
                tuple(NameMatcher.compile(group) for group in getattr(policy, dim).allow),
                NameMatcher.compile(getattr(policy, dim).deny),
            )
            for dim in NAME_DIMENSIONS
        }
        self.name_checked = {dim: bool(c.allow or c.deny.patterns) for dim, c in self.names.items()}
        tools = self.names["tools"]
        self.tools_deny = tools.deny if tools.deny.patterns else None
        self.tools_allow = tools.allow
        level = policy.side_effect_level
        self.ceiling = None if level is None else int(level)
        self.paths = policy.paths
        self.paths_restricted = policy.paths.restricted
        self.commands_allow = tuple(
            CommandRuleSet(tuple(CommandRule.parse(r) for r in group))
            for group in policy.commands.allow
        )
        self.commands_deny = CommandRuleSet(
            tuple(CommandRule.parse(r) for r in policy.commands.deny)
        )
        self.commands_restricted = policy.commands.restricted
        self.commands_all = _allows_everything(policy.commands)
        self.network_allow = tuple(
            tuple(DomainRule.parse(r) for r in group) for group in policy.network.allow
        )
        self.network_deny = tuple(DomainRule.parse(r) for r in policy.network.deny)
        self.network_restricted = policy.network.restricted
        self.network_all = _allows_everything(policy.network)
        self._path_cache: dict[tuple[PathContext, str], PathCheck] = {}
        self.tools_ok: dict[str, bool] = {}
        #: ``(ctx, access, resolved target)`` that passed this policy's path rules. The
        #: target is resolved afresh on every call; only the pure string match is memoised.
        self.paths_ok: set[tuple[PathContext, str, str]] = set()

    def tools_verdict(self, name: str) -> bool:
        """Whether the tools rules allow ``name``; memoised (bounded) in :attr:`tools_ok`."""
        deny = self.tools_deny
        ok = not (deny is not None and deny.matches(name)) and all(
            matcher.matches(name) for matcher in self.tools_allow
        )
        if len(self.tools_ok) < 4096:
            self.tools_ok[name] = ok
        return ok

    def path_check(self, ctx: PathContext, access: str) -> PathCheck:
        """Deny matcher and allow matchers for ``access`` (``read``/``write``) under ``ctx``."""
        key = (ctx, access)
        hit = self._path_cache.get(key)
        if hit is None:
            rules = self.paths.for_access(access)
            hit = PathCheck(
                rules,
                compile_paths(rules.deny, ctx, True) if rules.deny else None,
                tuple(compile_paths(group, ctx, False) for group in rules.allow),
            )
            self._path_cache[key] = hit
        return hit


@dataclass(frozen=True, slots=True)
class PathCheck:
    rules: Rules
    deny: PathMatcher | None
    allow: tuple[PathMatcher, ...]


def _allows_everything(rules: Rules) -> bool:
    """``allow = ["*"]`` with no deny: nothing to check, so no argument is needed."""
    return not rules.deny and all("*" in group for group in rules.allow)


@dataclass(frozen=True)
class Policy:
    """One immutable policy frame. Every dimension is optional; omitted means unrestricted.

    Build one with :meth:`from_dict` (which accepts the seeds' short forms) or directly.
    """

    tools: Rules = Rules()
    side_effect_level: SideEffectLevel | None = None
    paths: PathRules = PathRules()
    network: Rules = Rules()
    commands: Rules = Rules()
    mcp_servers: Rules = Rules()
    skills: Rules = Rules()
    members: Rules = Rules()
    capabilities: Rules = Rules()
    allow_sensitive: frozenset[str] = frozenset()
    sandbox: str = "auto"
    name: str | None = field(default=None, compare=False)

    # -- construction -----------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> Policy:
        """Parse a policy dict; raise :class:`PolicyError` listing every problem."""
        issues: list[PolicyIssue] = []
        policy = _parse_policy(data, "", issues)
        if issues:
            raise PolicyError(issues, source)
        return policy

    @classmethod
    def allow_all(cls) -> Policy:
        """A frame with no restriction (the default sensitive-path denies still apply)."""
        return cls()

    def sensitive_denied(self) -> tuple[str, ...]:
        """Names of the default sensitive-path denies this policy does not lift."""
        return tuple(name for name in SENSITIVE_PATHS if name not in self.allow_sensitive)

    def with_name(self, name: str | None) -> Policy:
        """The same policy under another name (names label frames; they decide nothing)."""
        return replace(self, name=name)

    def intersect(self, other: Policy) -> Policy:
        """The policy that allows exactly what both allow."""
        level = self.side_effect_level
        if other.side_effect_level is not None:
            level = (
                other.side_effect_level if level is None else min(level, other.side_effect_level)
            )
        return Policy(
            tools=self.tools.intersect(other.tools),
            side_effect_level=level,
            paths=self.paths.intersect(other.paths),
            network=self.network.intersect(other.network),
            commands=self.commands.intersect(other.commands),
            mcp_servers=self.mcp_servers.intersect(other.mcp_servers),
            skills=self.skills.intersect(other.skills),
            members=self.members.intersect(other.members),
            capabilities=self.capabilities.intersect(other.capabilities),
            allow_sensitive=self.allow_sensitive & other.allow_sensitive,
            sandbox=_sandbox_meet(self, other),
            name=self.name if self.name == other.name else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """Canonical dict form (long form, only restricted dimensions)."""
        out: dict[str, Any] = {}
        if self.name:
            out["name"] = self.name
        for dim in ("tools", "mcp_servers", "capabilities", "skills", "members"):
            rules: Rules = getattr(self, dim)
            if rules.restricted:
                out[dim] = rules.to_dict()
        if self.side_effect_level is not None:
            out["side_effect_level"] = self.side_effect_level.label
        if self.paths.restricted:
            out["paths"] = self.paths.to_dict()
        if self.commands.restricted:
            out["commands"] = self.commands.to_dict()
        if self.network.restricted:
            out["network"] = self.network.to_dict()
        if self.allow_sensitive:
            out["allow_sensitive"] = sorted(self.allow_sensitive)
        if self.sandbox != "auto":
            out["sandbox"] = self.sandbox
        return out

    @property
    def needs_sandbox(self) -> bool:
        """Whether a shell under this policy must run in an OS sandbox (paths or network)."""
        return self.paths.restricted or self.network.restricted

    @cached_property
    def compiled(self) -> CompiledPolicy:
        """Matchers for this policy (built on first use, then reused)."""
        return CompiledPolicy(self)


def mcp_tools_follow_servers(policy: Policy) -> tuple[Policy, tuple[str, ...]]:
    """Apply the rule for a tools allow list beside an MCP server allow list.

    The rule (docs/policy.md, "MCP tools and tools.allow"): when one author's policy
    allows MCP servers by name and has a ``tools`` allow list that names no MCP tool
    (no ``server__tool`` pattern), the tools of those servers are allowed too: each such
    allow list gains ``<server>__*`` for every allowed server pattern. Otherwise allowing
    a server would silently offer none of its tools. A tools allow list that names MCP
    tools keeps exactly what it names. Apply it to each authored source *before* frames
    are intersected (a frame that never mentioned servers must still not widen).

    Returns the policy and one note per allow list that was extended.
    """
    servers = tuple(dict.fromkeys(s for group in policy.mcp_servers.allow for s in group))
    if not servers or not policy.tools.allow:
        return policy, ()
    groups: list[tuple[str, ...]] = []
    notes: list[str] = []
    for group in policy.tools.allow:
        if any("__" in pattern for pattern in group) or not group:
            groups.append(group)
            continue
        added = tuple(f"{server}__*" for server in servers)
        groups.append(group + added)
        notes.append(
            "tools.allow names no MCP tool and mcp_servers.allow names "
            f"{', '.join(servers)}: their tools are allowed too ({', '.join(added)})"
        )
    if not notes:
        return policy, ()
    return replace(policy, tools=Rules(tuple(groups), policy.tools.deny)), tuple(notes)


def unknown_tool_names(
    policy: Policy,
    known: Iterable[str],
    *,
    where: str = "a built-in tool",
    suggest_from: Iterable[str] = (),
) -> list[str]:
    """Literal tool names in ``policy.tools`` that are not in ``known``, with a
    did-you-mean each from ``known`` and ``suggest_from`` (glob patterns and MCP
    ``server__tool`` names are skipped); a known name is never suggested for itself."""
    catalog = sorted({name.lower() for name in known})
    suggestions = sorted(set(catalog) | {name.lower() for name in suggest_from})
    rules = policy.tools
    out: list[str] = []
    seen: set[str] = set()
    for kind, names in (("allow", [n for g in rules.allow for n in g]), ("deny", rules.deny)):
        for name in names:
            if name in seen or "__" in name or any(c in name for c in "*?[]{}"):
                continue
            seen.add(name)
            if name.lower() in catalog:
                continue
            if name.lower() in suggestions:  # a real tool, only not in this catalog
                out.append(f"tools.{kind} names {name!r}, which is not {where}")
                continue
            import difflib  # only for an unknown name (every cold launch checks its names)

            close = difflib.get_close_matches(name.lower(), suggestions, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            out.append(f"tools.{kind} names {name!r}, which is not {where}{hint}")
    return out


def _sandbox_meet(a: Policy, b: Policy) -> str:
    # "off" survives an intersection only if every side that restricts paths or network
    # said "off" itself: one frame cannot switch off the sandbox another frame relies on.
    if "off" not in (a.sandbox, b.sandbox):
        return "auto"
    ok = all(p.sandbox == "off" or not p.needs_sandbox for p in (a, b))
    return "off" if ok else "auto"


# -- parsing --------------------------------------------------------------------------


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _parse_policy(data: Any, path: str, issues: list[PolicyIssue]) -> Policy:
    if not isinstance(data, Mapping):
        issues.append(PolicyIssue(path, f"expected a table/object, got {_type(data)}"))
        return Policy()
    seen: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        key_path = _join(path, str(key))
        if key not in _TOP_KEYS:
            issues.append(
                PolicyIssue(key_path, f"unknown field; expected one of {', '.join(_TOP_KEYS)}")
            )
            continue
        if key == "name":
            if not isinstance(value, str) or not value.strip():
                issues.append(PolicyIssue(key_path, "expected a non-blank string"))
            else:
                kwargs["name"] = value.strip()
            continue
        if key == "side_effect_level":
            try:
                kwargs["side_effect_level"] = SideEffectLevel.parse(value)
            except ValueError as exc:
                issues.append(PolicyIssue(key_path, str(exc)))
            continue
        if key == "allow_sensitive":
            names = _indexed_strings(value, key_path, issues)
            for i, name in names:
                if name not in SENSITIVE_PATHS:
                    issues.append(
                        PolicyIssue(
                            _join(key_path, i),
                            f"unknown sensitive-path name {name!r}; expected one of "
                            f"{', '.join(SENSITIVE_PATHS)}",
                        )
                    )
            kwargs["allow_sensitive"] = frozenset(n for _, n in names)
            continue
        if key == "sandbox":
            if value not in SANDBOX_MODES:
                issues.append(
                    PolicyIssue(key_path, f"expected one of {', '.join(map(repr, SANDBOX_MODES))}")
                )
            else:
                kwargs["sandbox"] = value
            continue
        dim = _DIM_ALIASES[key]
        if dim in seen:
            issues.append(PolicyIssue(key_path, f"duplicates {seen[dim]!r} (same dimension)"))
            continue
        seen[dim] = key
        if dim == "paths":
            kwargs["paths"] = _parse_paths(value, key_path, issues)
        else:
            kwargs[dim] = _parse_rules(value, key_path, dim, issues)
    return Policy(**kwargs)


def _type(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _string_list(value: Any, path: str, issues: list[PolicyIssue]) -> list[str]:
    return [item for _, item in _indexed_strings(value, path, issues)]


def _indexed_strings(value: Any, path: str, issues: list[PolicyIssue]) -> list[tuple[int, str]]:
    if not isinstance(value, (list, tuple)):
        issues.append(PolicyIssue(path, f"expected a list of strings, got {_type(value)}"))
        return []
    out: list[tuple[int, str]] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            issues.append(PolicyIssue(_join(path, i), f"expected a string, got {_type(item)}"))
        elif not item.strip():
            issues.append(PolicyIssue(_join(path, i), "expected a non-blank string"))
        else:
            out.append((i, item.strip()))
    return out


def _parse_rules(value: Any, path: str, dim: str, issues: list[PolicyIssue]) -> Rules:
    if isinstance(value, (list, tuple)):
        # Short form: a bare list is the allow list.
        return Rules((_patterns(value, path, dim, issues),), ())
    if not isinstance(value, Mapping):
        issues.append(
            PolicyIssue(
                path, f"expected a list (allow) or a table with allow/deny, got {_type(value)}"
            )
        )
        return Rules()
    allow: list[tuple[str, ...]] = []
    deny: tuple[str, ...] = ()
    for key, item in value.items():
        key_path = _join(path, str(key))
        if key == "allow":
            allow.append(_patterns(item, key_path, dim, issues))
        elif key == "allow_all_of":
            if not isinstance(item, (list, tuple)):
                issues.append(PolicyIssue(key_path, "expected a list of lists"))
                continue
            for i, group in enumerate(item):
                allow.append(_patterns(group, _join(key_path, i), dim, issues))
        elif key == "deny":
            deny = _patterns(item, key_path, dim, issues)
        elif dim != "paths" or key not in ("read", "write"):
            issues.append(
                PolicyIssue(key_path, f"unknown field; expected one of {', '.join(_RULE_KEYS)}")
            )
    return Rules(tuple(allow), deny)


def _parse_paths(value: Any, path: str, issues: list[PolicyIssue]) -> PathRules:
    base = _parse_rules(value, path, "paths", issues)
    if not isinstance(value, Mapping):
        return PathRules(base)
    read = (
        _parse_rules(value["read"], _join(path, "read"), "paths", issues)
        if "read" in value
        else Rules()
    )
    write = (
        _parse_rules(value["write"], _join(path, "write"), "paths", issues)
        if "write" in value
        else Rules()
    )
    for kind, rules in (("read", value.get("read")), ("write", value.get("write"))):
        if isinstance(rules, Mapping) and ("read" in rules or "write" in rules):
            issues.append(PolicyIssue(_join(path, kind), "read/write rules cannot nest"))
    return PathRules(base, read, write)


def _patterns(value: Any, path: str, dim: str, issues: list[PolicyIssue]) -> tuple[str, ...]:
    out: list[str] = []
    for i, item in _indexed_strings(value, path, issues):
        item_path = _join(path, i)
        if dim in ("tools", "mcp_servers", "skills", "members"):
            out.append(canonical_name(item))
        elif dim == "capabilities":
            name = canonical_name(item)
            if name != "*" and not _CAPABILITY.match(name):
                issues.append(
                    PolicyIssue(
                        item_path,
                        f"expected 'namespace.operation' (e.g. git.get_diff), got {item!r}",
                    )
                )
            out.append(name)
        elif dim == "commands":
            try:
                CommandRule.parse(item)
            except ValueError as exc:
                issues.append(PolicyIssue(item_path, str(exc)))
            out.append(item)
        elif dim == "network":
            try:
                DomainRule.parse(item)
            except (ValueError, HostError) as exc:
                issues.append(PolicyIssue(item_path, str(exc)))
            out.append(item.strip().lower())
        else:
            out.append(item)
    return _dedupe(out)
