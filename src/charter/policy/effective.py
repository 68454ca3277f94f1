"""A readable, normalised view of what a stack allows (for print-policy, <scope>, receipts)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from functools import reduce
from typing import Any

from .frame import Frame
from .model import Policy, Rules

_GLOB = frozenset("*?[")


def _is_literal(pattern: str) -> bool:
    return not any(ch in _GLOB for ch in pattern)


def _names_view(rules: Rules) -> dict[str, Any]:
    """Allow as one list when the conjunction reduces to literals; ``None`` = unrestricted."""
    view: dict[str, Any] = {"allow": None, "deny": list(rules.deny)}
    groups = rules.allow
    if not groups:
        return view
    if len(groups) == 1:
        view["allow"] = list(groups[0])
        return view
    literal_groups = [g for g in groups if all(_is_literal(p) for p in g)]
    if literal_groups:
        base = min(literal_groups, key=len)
        view["allow"] = [
            name
            for name in base
            if all(any(fnmatch.fnmatchcase(name, p) for p in group) for group in groups)
        ]
        return view
    view["allow_all_of"] = [list(g) for g in groups]
    return view


def _rules_view(rules: Rules) -> dict[str, Any]:
    view: dict[str, Any] = {"allow": None, "deny": list(rules.deny)}
    if len(rules.allow) == 1:
        view["allow"] = list(rules.allow[0])
    elif rules.allow:
        view["allow_all_of"] = [list(g) for g in rules.allow]
    return view


def combined_policy(frames: Sequence[Frame]) -> Policy:
    """The single policy equivalent to the stack (its intersection)."""
    if not frames:
        return Policy()
    return reduce(Policy.intersect, (f.policy for f in frames))


def effective(frames: Sequence[Frame]) -> dict[str, Any]:
    """What ``frames`` allow, dimension by dimension. ``allow: None`` means unrestricted."""
    policy = combined_policy(frames)
    handoffs = [f.source_handoff for f in frames if f.source_handoff]
    return {
        "active": bool(frames),
        "frames": [
            {
                "index": i,
                "label": f.label,
                "kind": f.kind,
                "stage": f.stage,
                "source_handoff": f.source_handoff,
            }
            for i, f in enumerate(frames)
        ],
        "tools": _names_view(policy.tools),
        "side_effect_level": policy.side_effect_level.label
        if policy.side_effect_level is not None
        else None,
        "paths": {
            "read": _rules_view(policy.paths.for_access("read")),
            "write": _rules_view(policy.paths.for_access("write")),
        },
        "sensitive_paths_denied": list(policy.sensitive_denied()) if frames else [],
        "commands": _rules_view(policy.commands),
        "network": _rules_view(policy.network),
        "mcp_servers": _names_view(policy.mcp_servers),
        "skills": _names_view(policy.skills),
        "members": _names_view(policy.members),
        "capabilities": _names_view(policy.capabilities),
        "source_handoff": handoffs[-1] if handoffs else None,
    }


def render_effective(view: dict[str, Any]) -> str:
    """Plain-text rendering of :func:`effective` for people."""
    if not view["active"]:
        return "no policy is active: every call is allowed\n"
    lines = ["frames (bottom first):"]
    for f in view["frames"]:
        extra = f" from handoff {f['source_handoff']}" if f["source_handoff"] else ""
        lines.append(f"  {f['index']}. {f['label']} [{f['kind']}]{extra}")
    level = view["side_effect_level"] or "unrestricted"
    lines.append(f"side_effect_level: {level}")

    def fmt(name: str, v: dict[str, Any]) -> None:
        if "allow_all_of" in v:
            allow = " AND ".join("[" + ", ".join(g) + "]" for g in v["allow_all_of"])
        elif v["allow"] is None:
            allow = "any"
        else:
            allow = ", ".join(v["allow"]) if v["allow"] else "nothing"
        deny = ", ".join(v["deny"]) if v["deny"] else "-"
        lines.append(f"{name}: allow {allow}; deny {deny}")

    fmt("tools", view["tools"])
    fmt("paths (read)", view["paths"]["read"])
    fmt("paths (write)", view["paths"]["write"])
    lines.append("sensitive paths denied: " + (", ".join(view["sensitive_paths_denied"]) or "-"))
    for dim in ("commands", "network", "mcp_servers", "skills", "members", "capabilities"):
        fmt(dim, view[dim])
    return "\n".join(lines) + "\n"
