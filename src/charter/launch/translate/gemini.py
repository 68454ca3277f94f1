"""Gemini CLI: a policy-engine TOML passed with ``--admin-policy``, ``--approval-mode``.

Observed with gemini 0.61.0: the system settings file (the seed's plan) is ignored unless
it and every parent directory are root-owned and not group/other-writable; the admin
policy file works from any path, also under ``--yolo``, and covers MCP tools with
``toolName = "mcp_<server>_*"``; the real tool names are ``run_shell_command``, ``replace``,
``write_file``, ``read_file``, ``web_fetch``, ``google_web_search``, ``grep_search``, ``glob``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any

from .common import (
    NONE,
    PARTIAL,
    STRONG,
    Context,
    Translation,
    allow_groups_literal,
    literal_denied_servers,
    path_rules,
    path_value_regex,
    server_allowed,
    show_rules,
    split_tools,
)

_MODES = {
    "shadow": "plan",
    "suggest": "default",
    "act_with_approval": "default",
    "act_auto": "yolo",
}
_PATH_TOOLS = {
    "read": ("read_file", "list_directory", "glob", "grep_search"),
    "write": ("write_file", "replace"),
}


def _q(text: str) -> str:
    return json.dumps(text)


def _rule(tools: list[str] | str, decision: str, priority: int, **extra: str) -> str:
    names = _q(tools) if isinstance(tools, str) else "[" + ", ".join(_q(n) for n in tools) + "]"
    lines = ["[[rule]]", f"toolName = {names}"]
    lines.extend(f"{k} = {_q(v)}" for k, v in extra.items())
    lines += [f'decision = "{decision}"', f"priority = {priority}", ""]
    return "\n".join(lines)


def _command_match(rule: str) -> dict[str, str]:
    """A policy-engine matcher for one command rule: ``commandPrefix`` for ``git:*`` (gemini
    adds the word boundary), ``commandRegex`` (matched right after ``"command":"``) for an
    exact command."""
    text = rule.strip()
    prefix = text.endswith(":*") or text.endswith(" *") or text == "*"
    words = text.removesuffix(":*").removesuffix(" *").split()
    if prefix or not words:
        return {"commandPrefix": " ".join(words)}
    return {"commandRegex": r"\s+".join(re.escape(w) for w in words) + '"'}


def secure_dir(path: str) -> bool:
    """Would gemini accept a system settings file here (root-owned, not g/o-writable)?"""
    current = os.path.abspath(path)
    while True:
        try:
            st = os.stat(current)
        except OSError:
            return False
        if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
        parent = os.path.dirname(current)
        if parent == current:
            return True
        current = parent


#: ``system`` (root only) or ``home``: how the persona's MCP servers reach gemini.
MCP_MODE_ENV = "CHARTER_GEMINI_MCP"


def _home_settings(ctx: Context, t: Translation, servers: dict[str, Any]) -> None:
    """MCP servers for any user: gemini reads ``$GEMINI_CLI_HOME/.gemini/settings.json``.

    The launch's own gemini home holds the user's settings merged with the persona's
    servers (the user's other settings and servers kept; a persona server wins on a name
    clash), and every other entry of the user's ``~/.gemini`` (auth, history, trust) as
    a symlink, so gemini keeps its state. A user settings file that does not parse is
    not replaced blindly: the servers are then not injected, and the launch says so.
    """
    user_dir = os.path.join(ctx.env.get("GEMINI_CLI_HOME") or ctx.home, ".gemini")
    settings: dict[str, Any] = {}
    path = os.path.join(user_dir, "settings.json")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        text = ""
    if text.strip():
        try:
            loaded = _load_jsonc(text)
        except ValueError as exc:
            t.notes.append(
                f"{path} is not JSON gemini and charter agree on ({exc}); the persona's MCP "
                f"servers ({', '.join(servers)}) were not injected"
            )
            return
        if not isinstance(loaded, dict):
            t.notes.append(f"{path} is not a JSON object; MCP servers were not injected")
            return
        settings = loaded
    existing = settings.get("mcpServers")
    mine: dict[str, Any] = existing if isinstance(existing, dict) else {}
    settings["mcpServers"] = {**mine, **servers}
    t.files["gemini-home/.gemini/settings.json"] = json.dumps(settings, indent=2)
    t.mirrors["gemini-home/.gemini"] = user_dir
    t.env["GEMINI_CLI_HOME"] = ctx.tmp("gemini-home")
    t.mcp.extend(servers)


def _load_jsonc(text: str) -> Any:
    """gemini's settings may carry // and /* */ comments (gemini strips them too): parsed
    by json5, which knows a ``/*`` inside a string is not a comment."""
    import json5

    return json5.loads(text)


def translate(ctx: Context) -> Translation:
    t = Translation()
    p = ctx.policy
    shown, hidden = split_tools(ctx)
    shown_names = [tool.name for tool in shown]
    hidden_names = [tool.name for tool, _ in hidden]
    shell = "run_shell_command" in shown_names
    allow_list = bool(p.tools.allow) or p.side_effect_level is not None
    verdict = "allow" if ctx.tier == "act_auto" else "ask_user"
    rules: list[str] = []
    if hidden_names:
        rules.append(_rule(hidden_names, "deny", 900))
    reasons = "; ".join(f"{tool.name}: {why}" for tool, why in hidden) or "nothing hidden"

    servers: dict[str, Any] = {}
    dropped: list[str] = []
    if ctx.inject_mcp:
        for name, spec in ctx.mcp_servers.items():
            (
                servers.__setitem__(name, dict(spec))
                if server_allowed(ctx, name).allowed
                else dropped.append(name)
            )
    if allow_list and ctx.has_policy:
        rules.append(_rule("*", "deny", 100))
        if shown_names:
            rules.append(_rule(shown_names, verdict, 200))
        for name in servers:
            rules.append(_rule(f"mcp_{name}_*", verdict, 200))
    if p.tools.restricted or p.side_effect_level is not None:
        for key, show in (
            ("tools.allow", bool(p.tools.allow)),
            ("tools.deny", bool(p.tools.deny)),
            ("side_effect_level", p.side_effect_level is not None),
        ):
            if show:
                value = (
                    p.side_effect_level.label
                    if key == "side_effect_level" and p.side_effect_level is not None
                    else show_rules(p.tools, key.split(".")[1])
                )
                t.add(
                    key,
                    value,
                    ["--admin-policy (deny rules, priority 900)"]
                    + (['toolName="*" deny (priority 100)'] if allow_list else []),
                    STRONG,
                    f"admin policy rules remove the tools ({reasons})",
                )

    for access in ("read", "write"):
        pr = path_rules(p, access)
        tools = [n for n in _PATH_TOOLS[access] if n in shown_names]
        if pr.deny:
            patterns = []
            for pat in pr.deny:
                patterns.append(
                    r'"(?:file_path|dir_path|path|absolute_path)"\s*:\s*"'
                    + path_value_regex(pat, ctx)
                    + r'(?:/|")'
                )
            if tools:
                for pattern in patterns:
                    rules.append(_rule(tools, "deny", 950, argsPattern=pattern))
            t.add(
                f"paths.{access}.deny",
                show_rules(pr, "deny"),
                [f"argsPattern deny rules on {', '.join(tools) or '(no tool)'}"],
                PARTIAL if (shell or tools) else STRONG,
                "regular expressions over the tool arguments (a differently spelled path "
                "slips through)"
                + ("; run_shell_command can still read/write them" if shell else "")
                if (shell or tools)
                else "no tool that touches files is offered",
            )
        if pr.allow:
            t.add(
                f"paths.{access}.allow",
                show_rules(pr, "allow"),
                [],
                NONE if (shell or tools) else STRONG,
                "gemini has no path allow list"
                if (shell or tools)
                else "no tool that touches files is offered",
            )

    cmd = p.commands
    if cmd.deny and shell:
        for r in cmd.deny:
            rules.append(_rule("run_shell_command", "deny", 950, **_command_match(r)))
    allowed_cmds = allow_groups_literal(cmd)
    if allowed_cmds is not None and shell:
        rules.append(_rule("run_shell_command", "deny", 250))
        for r in allowed_cmds:
            rules.append(_rule("run_shell_command", verdict, 300, **_command_match(r)))
    if cmd.restricted:
        t.add(
            "commands." + ("allow" if cmd.allow else "deny"),
            "; ".join(
                x
                for x in (show_rules(cmd, "allow") if cmd.allow else "", show_rules(cmd, "deny"))
                if x
            ),
            ["--admin-policy commandRegex rules"] if shell else [],
            PARTIAL if shell else STRONG,
            "regular expressions over the whole command line (compound commands and "
            "interpreters are not looked into)"
            if shell
            else "run_shell_command is not offered",
        )

    net = p.network
    if net.restricted:
        web = [n for n in ("web_fetch", "google_web_search") if n in hidden_names]
        t.add(
            "network.deny" if net.deny else "network.allow",
            "; ".join(
                x
                for x in (show_rules(net, "allow") if net.allow else "", show_rules(net, "deny"))
                if x
            ),
            [f"not offered: {', '.join(web)}"] if web else [],
            PARTIAL if shell or not web else STRONG,
            "only the web tools are restricted: run_shell_command can reach the network"
            if shell
            else (
                "web tools removed and no shell is offered"
                if web
                else "gemini cannot restrict single hosts"
            ),
        )

    # -- MCP -------------------------------------------------------------------------------
    denied = list(dict.fromkeys(literal_denied_servers(p) + dropped))
    for s in denied:
        rules.append(_rule(f"mcp_{s}_*", "deny", 900))
    args: list[str] = []
    if p.mcp_servers.allow and ctx.has_policy:
        names = list(servers) + [
            s
            for s in (allow_groups_literal(p.mcp_servers) or [])
            if not any(c in s for c in "*?[") and s not in servers
        ]
        if names:
            args.append("--allowed-mcp-server-names=" + ",".join(names))
        else:
            rules.append(_rule("mcp_*", "deny", 900))
    if servers:
        mode = ctx.env.get(MCP_MODE_ENV) or (
            "system" if ctx.euid == 0 and secure_dir(os.path.dirname(ctx.tmpdir)) else "home"
        )
        if mode == "system":
            t.files["gemini-system-settings.json"] = json.dumps({"mcpServers": servers}, indent=2)
            t.env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = ctx.tmp("gemini-system-settings.json")
            t.mcp.extend(servers)
        else:
            _home_settings(ctx, t, servers)
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
            [*args, *(f'toolName="mcp_{s}_*" deny' for s in denied)],
            STRONG,
            "--allowed-mcp-server-names and admin-policy rules on mcp_<server>_*",
        )

    for dim, tool in (("skills", "activate_skill"), ("members", "invoke_agent")):
        r = getattr(p, dim)
        if r.restricted:
            gone = tool not in shown_names
            t.add(
                dim,
                show_rules(r, "allow") if r.allow else show_rules(r, "deny"),
                [f"{tool} not offered"] if gone else [],
                STRONG if gone else NONE,
                f"{tool} is not offered" if gone else f"gemini has no per-{dim[:-1]} rule",
            )

    if rules:
        t.files["gemini-policy.toml"] = "# generated by charter launch\n\n" + "\n".join(rules)
        args.append("--admin-policy=" + ctx.tmp("gemini-policy.toml"))
    if ctx.has_policy or ctx.explicit_tier:
        mode = _MODES.get(ctx.tier, "default")
        t.permission_mode = mode
        args.append(f"--approval-mode={mode}")
        t.add(
            "autonomy_tier",
            ctx.tier,
            [f"--approval-mode={mode}"],
            STRONG,
            {
                "plan": "plan mode: read-only",
                "default": "gemini asks before acting "
                "(non-interactive runs drop tools that need approval)",
                "yolo": "what the policy allows runs without a prompt",
            }[mode],
            requested=ctx.explicit_tier,
        )
    t.args = args
    return t


def yolo_defaults(ctx: Context) -> tuple[list[str], str | None]:
    return [], None
