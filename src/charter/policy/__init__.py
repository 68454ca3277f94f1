"""charter.policy: the one capability-policy language every enforcement point uses.

Pure Python, no I/O beyond resolving paths. A :class:`Policy` is an immutable frame;
a stack of frames allows a call only if every frame allows it; :func:`decide` gives a
typed :class:`Decision` naming the frame, dimension and rule that decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from charter._lazy import lazy_exports

# Eager: the function ``effective`` shares its name with its module, and a lazy name
# would be shadowed by the submodule once anything imported charter.policy.effective.
from .effective import combined_policy, effective, render_effective

# Eager for the same reason: ``runs_later`` is also its module's name (and it is light).
from .runs_later import RUNS_LATER, RunsLater, runs_later

if TYPE_CHECKING:
    from .call import ToolAnnotations, ToolCall
    from .catalog import BUILTIN_TOOLS, builtin_annotations
    from .commands import CommandRule
    from .decision import Decision, Outcome
    from .engine import decide, decide_resource, decide_visibility
    from .errors import PolicyError, PolicyIssue
    from .frame import Frame
    from .levels import LEVEL_NAMES, UNANNOTATED_LEVEL, SideEffectLevel
    from .loader import load_policy_file
    from .model import PathRules, Policy, Rules, mcp_tools_follow_servers, unknown_tool_names
    from .names import canonical_name
    from .network import DEFAULT_SCHEMES, HostError, host_of, parse_target
    from .paths import SENSITIVE_PATHS, PathContext, expand_pattern, make_context, resolve_target
    from .scope import BASE_TOOLS, MEMORY_TOOLS, AgentScope
    from .scoped import ScopeViolation, scope_violation, scoped_policy, with_scoped_executor
    from .shell import CommandParseError, SimpleCommand, parse_command_line
    from .stack import (
        current_stack,
        decide_current,
        decide_current_resource,
        decide_current_visibility,
        with_execution_policy,
        with_handoff_policy,
    )

# Other names are imported on first use: a command that needs only the policy model (a
# cold print-policy) does not pay for the engine, the scope stack and their dataclasses.
_LAZY = {
    "ToolAnnotations": "call",
    "ToolCall": "call",
    "BUILTIN_TOOLS": "catalog",
    "builtin_annotations": "catalog",
    "CommandRule": "commands",
    "Decision": "decision",
    "Outcome": "decision",
    "decide": "engine",
    "decide_resource": "engine",
    "decide_visibility": "engine",
    "PolicyError": "errors",
    "PolicyIssue": "errors",
    "Frame": "frame",
    "LEVEL_NAMES": "levels",
    "UNANNOTATED_LEVEL": "levels",
    "SideEffectLevel": "levels",
    "load_policy_file": "loader",
    "PathRules": "model",
    "Policy": "model",
    "Rules": "model",
    "mcp_tools_follow_servers": "model",
    "unknown_tool_names": "model",
    "canonical_name": "names",
    "DEFAULT_SCHEMES": "network",
    "HostError": "network",
    "host_of": "network",
    "parse_target": "network",
    "SENSITIVE_PATHS": "paths",
    "PathContext": "paths",
    "expand_pattern": "paths",
    "make_context": "paths",
    "resolve_target": "paths",
    "BASE_TOOLS": "scope",
    "MEMORY_TOOLS": "scope",
    "AgentScope": "scope",
    "ScopeViolation": "scoped",
    "scope_violation": "scoped",
    "scoped_policy": "scoped",
    "with_scoped_executor": "scoped",
    "CommandParseError": "shell",
    "SimpleCommand": "shell",
    "parse_command_line": "shell",
    "current_stack": "stack",
    "decide_current": "stack",
    "decide_current_resource": "stack",
    "decide_current_visibility": "stack",
    "with_execution_policy": "stack",
    "with_handoff_policy": "stack",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "DEFAULT_SCHEMES",
    "HostError",
    "host_of",
    "parse_target",
    "BASE_TOOLS",
    "BUILTIN_TOOLS",
    "LEVEL_NAMES",
    "MEMORY_TOOLS",
    "RUNS_LATER",
    "SENSITIVE_PATHS",
    "UNANNOTATED_LEVEL",
    "AgentScope",
    "CommandParseError",
    "CommandRule",
    "Decision",
    "Frame",
    "Outcome",
    "PathContext",
    "PathRules",
    "RunsLater",
    "Policy",
    "mcp_tools_follow_servers",
    "unknown_tool_names",
    "PolicyError",
    "PolicyIssue",
    "Rules",
    "ScopeViolation",
    "SideEffectLevel",
    "SimpleCommand",
    "ToolAnnotations",
    "ToolCall",
    "builtin_annotations",
    "canonical_name",
    "runs_later",
    "combined_policy",
    "current_stack",
    "decide",
    "decide_current",
    "decide_current_resource",
    "decide_current_visibility",
    "decide_resource",
    "decide_visibility",
    "effective",
    "expand_pattern",
    "load_policy_file",
    "make_context",
    "resolve_target",
    "parse_command_line",
    "render_effective",
    "scope_violation",
    "scoped_policy",
    "with_execution_policy",
    "with_handoff_policy",
    "with_scoped_executor",
]
