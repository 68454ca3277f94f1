"""Claude Code: ``--tools`` (a real allow list, Claude's capitalised names), ``--disallowedTools``,
a settings file (permission rules, absolute paths with ``//``), ``--strict-mcp-config``.

Observed with claude 2.1.197: ``--allowedTools`` only auto-approves; lower-case names in
``--tools`` silently give zero tools; ``--tools`` does not cover MCP tools; a rule path with
one leading ``/`` is relative to the settings file, so absolute paths need ``//``.
"""

from __future__ import annotations

import json
from typing import Any

from .common import (
    NONE,
    PARTIAL,
    STRONG,
    Context,
    Translation,
    abs_pattern,
    allow_groups_literal,
    is_bare_name,
    literal_denied_servers,
    network_closed,
    path_rules,
    sensitive_patterns,
    server_allowed,
    show_rules,
    split_tools,
)

_MODES = {
    "shadow": "plan",
    "suggest": "default",
    "act_with_approval": "default",
    "act_auto": "dontAsk",
}


def _rule_path(pattern: str, ctx: Context) -> list[str]:
    """Claude rule paths for a policy path pattern (absolute paths need ``//``)."""
    if is_bare_name(pattern):
        return ["**/" + pattern.strip().rstrip("/")]
    path = abs_pattern(pattern, ctx)
    if path.endswith("/**") or "*" in path.rsplit("/", 1)[-1]:
        return ["/" + path]
    return ["/" + path, "/" + path.rstrip("/") + "/**"]


def translate(ctx: Context) -> Translation:
    t = Translation()
    p = ctx.policy
    shown, hidden = split_tools(ctx)
    shown_names = [tool.name for tool in shown]
    hidden_names = [tool.name for tool, _ in hidden]
    bash_shown = "Bash" in shown_names
    allow_list = bool(p.tools.allow) or p.side_effect_level is not None
    disallowed: list[str] = []

    # -- tools --------------------------------------------------------------------------
    tool_args: list[str] = []
    if hidden and allow_list:
        tool_args = ["--tools=" + ",".join(shown_names)]
    elif hidden:
        disallowed.extend(n for n in hidden_names if ctx.spec.tool(n) is not None)
    reasons = "; ".join(f"{tool.name}: {why}" for tool, why in hidden) or "nothing hidden"
    if p.tools.allow:
        t.add(
            "tools.allow",
            show_rules(p.tools, "allow"),
            tool_args or ["(every built-in tool is allowed)"],
            STRONG,
            "--tools is a hard list of built-in tools (Claude's own names); MCP tools are "
            "restricted through --strict-mcp-config and the servers charter injects",
        )
    if p.tools.deny:
        t.add(
            "tools.deny",
            show_rules(p.tools, "deny"),
            tool_args or ["--disallowedTools=" + ",".join(disallowed)],
            STRONG,
            f"denied tools are removed from the request ({reasons})",
        )
    if p.side_effect_level is not None:
        t.add(
            "side_effect_level",
            p.side_effect_level.label,
            tool_args or ["(no built-in tool is above the ceiling)"],
            STRONG,
            f"tools above the ceiling are not offered ({reasons})",
        )

    # -- settings: permission rules --------------------------------------------------------
    deny: list[str] = []
    allow: list[str] = []
    auto = ctx.tier == "act_auto" and ctx.has_policy
    touching = {
        "read": ("Read", "Glob", "Grep", "Bash", "NotebookEdit"),
        "write": ("Edit", "Write", "NotebookEdit", "Bash"),
    }
    for access, tools in (("read", ("Read",)), ("write", ("Edit", "Write"))):
        rules = path_rules(p, access)
        if rules.restricted and not any(n in shown_names for n in touching[access]):
            for part in ("allow", "deny"):
                if getattr(rules, part):
                    t.add(
                        f"paths.{access}.{part}",
                        show_rules(rules, part),
                        [],
                        STRONG,
                        f"no tool that can {access} files is offered",
                    )
            continue
        if rules.deny:
            rule_texts = [
                f"{tool}({path})"
                for pat in rules.deny
                for path in _rule_path(pat, ctx)
                for tool in tools
            ]
            deny.extend(rule_texts)
            t.add(
                f"paths.{access}.deny",
                show_rules(rules, "deny"),
                ["settings permissions.deny: " + ", ".join(rule_texts)],
                PARTIAL if bash_shown else STRONG,
                (
                    "file tools are refused these paths; Bash stays available and Claude only "
                    "checks the commands it recognises as file access"
                )
                if bash_shown
                else "file tools are refused these paths and Bash is not offered",
            )
        allowed = allow_groups_literal(rules)
        if allowed is not None:
            rule_texts = [
                f"{tool}({path})"
                for pat in allowed
                for path in _rule_path(pat, ctx)
                for tool in tools
            ]
            allow.extend(rule_texts)
            strong = auto and not bash_shown
            t.add(
                f"paths.{access}.allow",
                show_rules(rules, "allow"),
                ["settings permissions.allow: " + (", ".join(rule_texts) or "(none)")],
                STRONG if strong else PARTIAL,
                "in dontAsk mode only the listed paths are allowed to file tools"
                + ("; Bash is not offered" if not bash_shown else "; Bash stays available")
                if auto
                else "listed paths are pre-approved; other paths prompt the user "
                "(a person decides)",
            )
    sens = (
        [
            f"{tool}({path})"
            for _, pat in sensitive_patterns(p)
            for path in _rule_path(pat, ctx)
            for tool in ("Read", "Edit")
        ]
        if ctx.has_policy
        else []
    )
    if sens:
        deny.extend(sens)
        t.add(
            "paths.sensitive",
            ", ".join(sorted({n for n, _ in sensitive_patterns(p)})),
            [f"settings permissions.deny: {len(sens)} Read/Edit rules"],
            PARTIAL if bash_shown else STRONG,
            "default sensitive-path denies as Read/Edit rules"
            + ("; Bash can still read them" if bash_shown else ""),
            requested=False,
        )

    cmd = p.commands
    if cmd.deny:
        rule_texts = [f"Bash({r})" for r in cmd.deny]
        deny.extend(rule_texts)
        t.add(
            "commands.deny",
            show_rules(cmd, "deny"),
            ["settings permissions.deny: " + ", ".join(rule_texts)],
            PARTIAL if bash_shown else STRONG,
            "Bash prefix rules: Claude splits compound commands, but wrappers and "
            "interpreters (python -c, sh -c) are not looked into"
            if bash_shown
            else "Bash is not offered",
        )
    cmd_allowed = allow_groups_literal(cmd)
    if cmd_allowed is not None:
        rule_texts = [f"Bash({r})" for r in cmd_allowed]
        allow.extend(rule_texts)
        t.add(
            "commands.allow",
            show_rules(cmd, "allow"),
            ["settings permissions.allow: " + (", ".join(rule_texts) or "(none)")],
            STRONG if (auto or not bash_shown) else PARTIAL,
            "dontAsk mode refuses every command that no allow rule matches"
            if auto
            else (
                "Bash is not offered"
                if not bash_shown
                else "listed commands are pre-approved; others prompt the user"
            ),
        )

    net = p.network
    if net.restricted:
        closed = network_closed(p)
        web = [n for n in ("WebFetch", "WebSearch") if n in hidden_names]
        if not closed:
            # WebFetch knows hosts, not schemes: a scheme rule denies its host outright and
            # pre-approves nothing (never wider than the policy)
            deny.extend(f"WebFetch(domain:{d.split('://', 1)[-1]})" for d in net.deny if d != "*")
            for d in allow_groups_literal(net) or []:
                if "://" not in d:
                    allow.append(f"WebFetch(domain:{d})")
        key = "network.deny" if net.deny else "network.allow"
        t.add(
            key,
            "; ".join(
                x
                for x in (show_rules(net, "allow") if net.allow else "", show_rules(net, "deny"))
                if x
            ),
            [f"not offered: {', '.join(web)}" if web else "WebFetch(domain:...) rules"],
            PARTIAL if bash_shown else STRONG,
            "Bash stays available and Claude Code has no network sandbox: curl/wget reach "
            "the network; only the web tools are restricted"
            if bash_shown
            else "web tools restricted and Bash is not offered",
        )

    # -- MCP -------------------------------------------------------------------------------
    servers: dict[str, Any] = {}
    dropped: list[str] = []
    if ctx.inject_mcp:
        for name, spec in ctx.mcp_servers.items():
            if server_allowed(ctx, name).allowed:
                servers[name] = dict(spec)
            else:
                dropped.append(name)
    strict_mcp = bool(p.mcp_servers.allow) or allow_list
    mcp_args: list[str] = []
    if servers:
        t.files["claude-mcp.json"] = json.dumps({"mcpServers": servers}, indent=2)
        mcp_args.append("--mcp-config=" + ctx.tmp("claude-mcp.json"))
        t.mcp.extend(servers)
    if strict_mcp and ctx.has_policy:
        mcp_args.append("--strict-mcp-config")
    denied_servers = literal_denied_servers(p) + dropped
    disallowed.extend(f"mcp__{s}" for s in dict.fromkeys(denied_servers))
    if p.mcp_servers.restricted:
        t.add(
            "mcp_servers." + ("allow" if p.mcp_servers.allow else "deny"),
            "; ".join(
                x
                for x in (
                    show_rules(p.mcp_servers, "allow") if p.mcp_servers.allow else "",
                    show_rules(p.mcp_servers, "deny"),
                )
                if x
            ),
            mcp_args + [f"--disallowedTools=mcp__{s}" for s in dict.fromkeys(denied_servers)],
            STRONG,
            "only allowed persona servers are injected; --strict-mcp-config ignores other "
            "MCP configuration"
            if strict_mcp
            else "denied servers' tools are removed with --disallowedTools mcp__<server>",
        )

    # -- skills, members ---------------------------------------------------------------------
    for dim, tool in (("skills", "Skill"), ("members", "Agent")):
        rules = getattr(p, dim)
        if rules.restricted:
            gone = tool not in shown_names
            t.add(
                dim,
                "; ".join(
                    x
                    for x in (
                        show_rules(rules, "allow") if rules.allow else "",
                        show_rules(rules, "deny"),
                    )
                    if x
                ),
                [f"{tool} not offered"] if gone else [],
                STRONG if gone else NONE,
                f"the {tool} tool is not offered"
                if gone
                else f"Claude Code has no per-{dim[:-1]} switch for its {tool} tool",
            )

    # -- permission mode ---------------------------------------------------------------------
    mode_args: list[str] = []
    if ctx.has_policy or ctx.explicit_tier:
        mode = _MODES.get(ctx.tier, "default")
        if mode == "dontAsk":
            # Everything the policy lets the model see runs without a prompt; anything
            # else (other paths, other commands) is refused instead of asked.
            restricted_by_rule = {
                "Read": path_rules(p, "read").allow,
                "Edit": path_rules(p, "write").allow,
                "Write": path_rules(p, "write").allow,
                "Bash": cmd.allow,
                "WebFetch": net.allow,
            }
            allow.extend(n for n in shown_names if not restricted_by_rule.get(n))
        t.permission_mode = mode
        mode_args = [f"--permission-mode={mode}"]
        t.add(
            "autonomy_tier",
            ctx.tier,
            mode_args,
            STRONG,
            {
                "plan": "plan mode: read-only, nothing is executed",
                "default": "Claude asks before edits and commands",
                "dontAsk": "what the policy allows runs without a prompt; everything else "
                "is refused",
            }[mode],
            requested=ctx.explicit_tier,
        )

    settings: dict[str, Any] = {}
    if deny or allow:
        settings["permissions"] = {}
        if allow:
            settings["permissions"]["allow"] = list(dict.fromkeys(allow))
        if deny:
            settings["permissions"]["deny"] = list(dict.fromkeys(deny))
    if denied_servers:
        settings["deniedMcpServers"] = [{"serverName": s} for s in dict.fromkeys(denied_servers)]

    t.args.extend(tool_args)
    if disallowed:
        t.args.append("--disallowedTools=" + ",".join(dict.fromkeys(disallowed)))
    if settings:
        t.files["claude-settings.json"] = json.dumps(settings, indent=2)
        t.args.append("--settings=" + ctx.tmp("claude-settings.json"))
    t.args.extend(mcp_args)
    t.args.extend(mode_args)
    return t


def yolo_defaults(ctx: Context) -> tuple[list[str], str | None]:
    """The launcher's no-policy default, and a note when it is skipped."""
    if ctx.euid == 0 and ctx.env.get("IS_SANDBOX") != "1":
        return [], "running as root without IS_SANDBOX=1: Claude refuses bypassPermissions"
    return ["--permission-mode=bypassPermissions"], None
