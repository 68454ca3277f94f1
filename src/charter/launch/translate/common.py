"""What every per-CLI translator shares: the context, elements, and policy questions.

Translators never decide allow/deny themselves: which of a CLI's tools the model may be
offered comes from :func:`charter.policy.decide_visibility` (and, for tools whose calls
carry no subject argument, :func:`charter.policy.decide`); MCP servers from
:func:`charter.policy.decide_resource`. The translators only say how the CLI can be
made to enforce that, and how strongly it does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from charter.policy import (
    Decision,
    Frame,
    Policy,
    Rules,
    ToolAnnotations,
    ToolCall,
    decide,
    decide_resource,
    decide_visibility,
    expand_pattern,
    make_context,
)

from ..clis import CliSpec, CliTool

STRONG, PARTIAL, NONE = "strong", "partial", "none"
STRENGTHS = (STRONG, PARTIAL, NONE)

#: Autonomy tiers (charter.manifest.AutonomyTier values) in order of trust.
TIERS = ("shadow", "suggest", "act_with_approval", "act_auto")


@dataclass(frozen=True, slots=True)
class Element:
    """One policy element, how it was translated for a CLI, and how strongly it holds."""

    key: str
    value: str
    translation: tuple[str, ...]
    strength: str
    reason: str
    requested: bool = True  # False for implicit elements (default sensitive-path denies)
    enforcer: str = "cli"  # cli, sandbox or both (charter.launch.sandboxing)

    def to_dict(self) -> dict[str, Any]:
        return {
            "element": self.key,
            "value": self.value,
            "translation": list(self.translation),
            "strength": self.strength,
            "reason": self.reason,
            "requested": self.requested,
            "enforced_by": self.enforcer,
        }


@dataclass
class Translation:
    """A translator's output: policy args, environment, files for the temp dir, elements."""

    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # name in the temp dir -> content
    # directory in the temp dir -> a directory whose entries are symlinked into it at
    # launch (those ``files`` does not provide): a CLI's state dir with one file replaced
    mirrors: dict[str, str] = field(default_factory=dict)
    elements: list[Element] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    mcp: list[str] = field(default_factory=list)  # MCP servers injected
    permission_mode: str | None = None

    def add(
        self,
        key: str,
        value: str,
        translation: list[str] | tuple[str, ...],
        strength: str,
        reason: str,
        *,
        requested: bool = True,
    ) -> None:
        self.elements.append(Element(key, value, tuple(translation), strength, reason, requested))


@dataclass(frozen=True)
class Context:
    """Everything a translator may look at."""

    spec: CliSpec
    policy: Policy
    has_policy: bool
    tier: str
    explicit_tier: bool
    workspace: str
    home: str
    tmpdir: str
    env: Mapping[str, str]
    user_args: tuple[str, ...]
    mcp_servers: Mapping[str, Mapping[str, Any]]
    inject_mcp: bool = True
    euid: int = field(default_factory=lambda: os.geteuid() if hasattr(os, "geteuid") else 1000)

    @property
    def frames(self) -> list[Frame]:
        return [Frame(self.policy, self.policy.name or "persona", "persona")]

    def tmp(self, name: str) -> str:
        return os.path.join(self.tmpdir, name)


# -- policy questions, answered by charter.policy ---------------------------------------


def visibility(ctx: Context, tool: CliTool) -> Decision:
    """May ``tool`` be offered to the model at all (decided by charter.policy)?"""
    ann = tool.policy_annotations()
    call = ToolCall(tool.canonical, {}, ann)
    decision = decide_visibility(call, ctx.frames)
    if decision.allowed and not ann.argument_subjects:
        # Nothing about a call of this tool depends on its arguments: decide it outright.
        decision = decide(call, ctx.frames, context=make_context(ctx.workspace, ctx.home))
    return decision


def network_closed(policy: Policy) -> bool:
    """Every host is denied (``deny = ["*"]`` or an empty allow list)."""
    return policy.network.allows_nothing


def commands_closed(policy: Policy) -> bool:
    """No command is allowed (``deny = ["*"]`` or an empty allow list)."""
    return policy.commands.allows_nothing


def split_tools(ctx: Context) -> tuple[list[CliTool], list[tuple[CliTool, str]]]:
    """The CLI's tools the policy lets the model see, and the hidden ones with the reason."""
    shown: list[CliTool] = []
    hidden: list[tuple[CliTool, str]] = []
    for tool in ctx.spec.tools:
        kind = tool.policy_annotations().kind
        decision = visibility(ctx, tool)
        if not decision.allowed:
            hidden.append((tool, decision.rule or decision.reason))
        elif kind == "fetch" and network_closed(ctx.policy):
            hidden.append((tool, "network: every host is denied"))
        elif kind == "execute" and commands_closed(ctx.policy):
            hidden.append((tool, "commands: no command is allowed"))
        else:
            shown.append(tool)
    return shown, hidden


def server_allowed(ctx: Context, server: str) -> Decision:
    """May the tools of MCP server ``server`` be offered (server rules, tool rules, level)?"""
    decision = decide_resource("mcp_servers", server, ctx.frames)
    if not decision.allowed:
        return decision
    probe = ToolCall(f"{server}__*", {}, ToolAnnotations(mcp_server=server))
    return decide_visibility(probe, ctx.frames)


def literal_denied_servers(policy: Policy) -> list[str]:
    return [p for p in policy.mcp_servers.deny if not any(c in p for c in "*?[")]


def mcp_restricted(policy: Policy) -> bool:
    return policy.mcp_servers.restricted


def tools_restricted(policy: Policy) -> bool:
    return policy.tools.restricted or policy.side_effect_level is not None


def has_allow_list(rules: Rules) -> bool:
    return bool(rules.allow)


# -- rendering helpers ----------------------------------------------------------------------


def show_rules(rules: Rules, part: str) -> str:
    if part == "deny":
        return ", ".join(rules.deny)
    groups = rules.allow
    if len(groups) == 1:
        return ", ".join(groups[0]) or "(nothing)"
    return " AND ".join("[" + ", ".join(g) + "]" for g in groups)


def allow_groups_literal(rules: Rules) -> list[str] | None:
    """The allow list when it reduces to one list (the intersection of literal groups)."""
    if not rules.allow:
        return None
    if len(rules.allow) == 1:
        return list(rules.allow[0])
    base = rules.allow[0]
    return [p for p in base if all(p in g or "*" in g for g in rules.allow[1:])]


def abs_pattern(pattern: str, ctx: Context) -> str:
    """A policy path pattern as an absolute glob (``~`` and workspace-relative resolved)."""
    prefix, rest = expand_pattern(pattern, make_context(ctx.workspace, ctx.home))
    if not rest:
        return prefix
    return (prefix.rstrip("/") + "/" + rest) if prefix != "/" else "/" + rest


def root_path(pattern: str, ctx: Context) -> str:
    """The directory a CLI that only knows roots (codex's writable roots) gets for a pattern.

    A bare name (``src``) matches at any depth in charter's policy; a root cannot, so it is
    taken relative to the workspace (agent-persona's reading, and narrower: fail closed).
    A glob keeps its literal prefix; never ``/`` unless the pattern itself is ``*``/``/``.
    """
    if is_bare_name(pattern):
        path = os.path.join(ctx.workspace, pattern.strip().rstrip("/"))
    else:
        path = abs_pattern(pattern, ctx)
    return path.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0].rstrip("/") or "/"


def _glob_regex(glob: str) -> str:
    """A regex for a path glob inside a JSON string value (no ``"`` crossed).

    Optional parts are written ``(?:x|)``, never ``(?:x)?``: gemini drops (with only a
    warning) every argsPattern its ReDoS check ``/\\([^)]*[*+?{].*\\)[*+?{]/`` flags, and
    ``(?:`` itself contains the ``?`` that check looks for.
    """
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append(r'(?:[^"]*/|)')
            i += 3
        elif glob.startswith("**", i):
            out.append(r'[^"]*')
            i += 2
        elif glob[i] == "*":
            out.append(r'[^/"]*')
            i += 1
        elif glob[i] == "?":
            out.append(r'[^/"]')
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def path_value_regex(pattern: str, ctx: Context) -> str:
    """A regex matching a path string value, absolute or relative to the workspace (with or
    without ``./``), that is at or below ``pattern``; callers anchor it between ``"`` and
    ``(?:/|")``. Built from the same canonical form as every other CLI's path syntax.
    """
    path = abs_pattern(pattern, ctx)
    if path.startswith("/**/") or path == "/**":
        # Any depth: the same text matches absolute and relative spellings.
        return r"(?:\./|)" + _glob_regex(path[1:])
    alts = [_glob_regex(path)]
    for ws in dict.fromkeys((ctx.workspace.rstrip("/"), os.path.realpath(ctx.workspace))):
        if path == ws:
            alts.append(r'(?!/)[^"]*')  # every relative path is inside the workspace
        elif path.startswith(ws + "/"):
            alts.append(r"(?:\./|)" + _glob_regex(path[len(ws) + 1 :]))
    return "(?:" + "|".join(dict.fromkeys(alts)) + ")"


def is_bare_name(pattern: str) -> bool:
    text = pattern.strip().rstrip("/")
    return "/" not in text and not text.startswith("~") and text not in (".", "..", "*", "**")


def path_rules(policy: Policy, access: str) -> Rules:
    return policy.paths.for_access(access)


def sensitive_patterns(policy: Policy) -> list[tuple[str, str]]:
    """(name, pattern) of the default sensitive-path denies still in force."""
    from charter.policy import SENSITIVE_PATHS

    return [(n, pattern) for n in policy.sensitive_denied() for pattern in SENSITIVE_PATHS[n]]


def within(path: str, root: str) -> bool:
    path, root = os.path.normpath(path), os.path.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")
