"""Codex: feature switches, ``web_search``, its sandbox (mode, writable roots, network), MCP.

Observed with codex 0.169.0: there is no tool allow list; ``--disable shell_tool`` removes
``exec_command``/``write_stdin``; ``-c web_search=disabled`` removes web search (the seed's
``features.web_search_request`` does nothing); ``--sandbox`` wins over ``-c sandbox_mode``;
writable roots that do not exist make every shell command fail; cwd and /tmp stay
writable unless excluded; ``--full-auto`` no longer exists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ..clis import CliTool
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
    root_path,
    server_allowed,
    show_rules,
    split_tools,
    visibility,
    within,
)

#: canonical tool -> the codex switch that removes it
_SWITCHES = {
    "bash": "--disable=shell_tool",
    "websearch": '--config=web_search="disabled"',
    "task": "--disable=multi_agent",
    "goals": "--disable=goals",
    "view_image": "--disable=view_image",
}

_APPROVAL = {
    "shadow": "never",
    "suggest": "on-request",
    "act_with_approval": "on-request",
    "act_auto": "never",
}


def _toml(value: Any) -> str:
    """A TOML value for ``-c key=value`` (JSON strings/arrays are valid TOML here)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value))


def _user_servers(ctx: Context) -> list[str]:
    """MCP servers in the user's codex config (so an allow list can switch the others off)."""
    home = ctx.env.get("CODEX_HOME") or os.path.join(ctx.home, ".codex")
    try:
        import tomllib

        with open(os.path.join(home, "config.toml"), "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, ValueError):
        return []
    servers = data.get("mcp_servers")
    return [str(k) for k in servers] if isinstance(servers, dict) else []


# persona.json (Claude-style) MCP keys -> codex config keys.
_MCP_KEYS = {"bearerTokenEnvVar": "bearer_token_env_var"}


def translate(ctx: Context) -> Translation:
    t = Translation()
    p = ctx.policy
    shown, hidden = split_tools(ctx)
    hidden_canon = {tool.canonical for tool, _ in hidden}
    shown_canon = {tool.canonical for tool in shown}
    args: list[str] = []
    no_switch: list[str] = []
    for canon in dict.fromkeys(tool.canonical for tool, _ in hidden):
        if canon in _SWITCHES:
            args.append(_SWITCHES[canon])
        else:
            no_switch.append(canon)
    reasons = "; ".join(f"{tool.name}: {why}" for tool, why in hidden) or "nothing hidden"
    tool_strength = PARTIAL if no_switch else STRONG
    tool_reason = (
        f"removed: {', '.join(sorted(hidden_canon - set(no_switch))) or 'none'} ({reasons})"
        + (f"; codex has no switch for {', '.join(no_switch)}" if no_switch else "")
    )

    # Codex has no edit tool: writes go through the shell, so "no writes" is a sandbox.
    edit_ok = all(visibility(ctx, CliTool(n, n)).allowed for n in ("edit", "write"))
    shell = "bash" in shown_canon

    if p.tools.restricted:
        key = "tools.allow" if p.tools.allow else "tools.deny"
        t.add(
            key,
            "; ".join(
                x
                for x in (
                    show_rules(p.tools, "allow") if p.tools.allow else "",
                    show_rules(p.tools, "deny"),
                )
                if x
            ),
            list(args) or ["(no codex tool is affected)"],
            tool_strength,
            tool_reason + ("" if edit_ok else "; edit/write denied: the sandbox is read-only"),
        )
    if p.side_effect_level is not None:
        t.add(
            "side_effect_level",
            p.side_effect_level.label,
            list(args) or ["(no codex tool is above the ceiling)"],
            tool_strength,
            tool_reason,
        )

    # -- sandbox -------------------------------------------------------------------------
    sandbox: str | None = None
    if ctx.has_policy or ctx.explicit_tier:
        sandbox = "workspace-write"
        if ctx.tier == "shadow" or not edit_ok:
            sandbox = "read-only"
    write = path_rules(p, "write")
    read = path_rules(p, "read")
    roots: list[str] = []
    sandbox_cfg: list[str] = []
    if sandbox == "workspace-write" and write.allow:
        literal = allow_groups_literal(write) or []
        missing: list[str] = []
        broad = False
        for pat in literal:
            root = root_path(pat, ctx)
            broad = broad or (not is_bare_name(pat) and "*" in abs_pattern(pat, ctx))
            if os.path.isdir(root):
                roots.append(root)
            else:
                missing.append(root)
        if roots:
            sandbox_cfg.append("--config=sandbox_workspace_write.writable_roots=" + _toml(roots))
        if not any(within("/tmp", r) for r in roots):
            sandbox_cfg.append("--config=sandbox_workspace_write.exclude_slash_tmp=true")
            sandbox_cfg.append("--config=sandbox_workspace_write.exclude_tmpdir_env_var=true")
        cwd_ok = any(within(ctx.workspace, r) for r in roots) and not broad
        notes = []
        if missing:
            notes.append(f"skipped roots that do not exist (codex fails on them): {missing}")
        if not cwd_ok:
            notes.append("the working directory always stays writable in codex")
        if "/" in roots:
            notes.append("a writable root of / makes the whole filesystem writable")
        bare = [pat for pat in literal if is_bare_name(pat)]
        if bare:
            notes.append(f"bare names taken relative to the workspace: {bare}")
        t.add(
            "paths.write.allow",
            show_rules(write, "allow"),
            [f"--sandbox={sandbox}", *sandbox_cfg],
            PARTIAL if notes else STRONG,
            "; ".join(notes) or "the sandbox makes only these roots writable",
        )
    elif write.allow:
        t.add(
            "paths.write.allow",
            show_rules(write, "allow"),
            [f"--sandbox={sandbox}"],
            STRONG,
            "the sandbox is read-only: nothing is writable",
        )
    if write.deny:
        ro = sandbox == "read-only"
        t.add(
            "paths.write.deny",
            show_rules(write, "deny"),
            [f"--sandbox={sandbox}"] if ro else [],
            STRONG if ro else NONE,
            "the sandbox is read-only"
            if ro
            else "codex cannot deny a path inside its writable roots",
        )
    readers = shell or "view_image" in shown_canon
    for part in ("allow", "deny"):
        if getattr(read, part) and (part == "deny" or read.allow):
            t.add(
                f"paths.read.{part}",
                show_rules(read, part),
                [],
                NONE if readers else STRONG,
                "codex's sandbox lets every command read every file"
                if readers
                else "no codex tool that reads files is offered",
            )

    net = p.network
    if net.restricted:
        closed = network_closed(p)
        if sandbox == "workspace-write":
            sandbox_cfg.append("--config=sandbox_workspace_write.network_access=false")
        strong = sandbox is not None
        t.add(
            "network.deny" if net.deny else "network.allow",
            "; ".join(
                x
                for x in (show_rules(net, "allow") if net.allow else "", show_rules(net, "deny"))
                if x
            ),
            [
                f"--sandbox={sandbox}",
                "network_access=false",
                *([_SWITCHES["websearch"]] if "websearch" in hidden_canon else []),
            ],
            STRONG if strong else NONE,
            "the sandbox blocks all network access from commands"
            + ("" if closed else " (stricter than the policy: codex cannot allow single hosts)"),
        )

    cmd = p.commands
    if cmd.restricted:
        t.add(
            "commands." + ("allow" if cmd.allow else "deny"),
            "; ".join(
                x
                for x in (show_rules(cmd, "allow") if cmd.allow else "", show_rules(cmd, "deny"))
                if x
            ),
            [_SWITCHES["bash"]] if not shell else [],
            NONE if shell else STRONG,
            "codex has no command rules that a launcher can pass (execpolicy lives in CODEX_HOME)"
            if shell
            else "the shell tool is switched off",
        )

    # -- MCP -------------------------------------------------------------------------------
    mcp_args: list[str] = []
    dropped: list[str] = []
    if ctx.inject_mcp:
        for name, spec in ctx.mcp_servers.items():
            if not server_allowed(ctx, name).allowed:
                dropped.append(name)
                continue
            for key, value in spec.items():
                key = _MCP_KEYS.get(key, key)
                if key in ("command", "args", "env", "url", "cwd", "bearer_token_env_var"):
                    mcp_args.append(f"--config=mcp_servers.{name}.{key}={_toml(value)}")
            t.mcp.append(name)
    # Only servers the user's config defines can be switched off (codex rejects a server
    # with no transport); the persona's denied servers are simply not injected.
    user_servers = _user_servers(ctx)
    off = [
        s
        for s in user_servers
        if s not in t.mcp and (s in literal_denied_servers(p) or not server_allowed(ctx, s).allowed)
    ]
    mcp_args.extend(f"--config=mcp_servers.{s}.enabled=false" for s in off)
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
            [a for a in mcp_args if a.endswith("enabled=false")]
            or [f"not injected: {', '.join(dropped) or '(none)'}"],
            STRONG,
            "denied persona servers are not injected; denied servers of "
            "CODEX_HOME/config.toml are switched off",
        )

    for dim in ("skills", "members"):
        rules = getattr(p, dim)
        if rules.restricted:
            t.add(
                dim,
                show_rules(rules, "allow") if rules.allow else show_rules(rules, "deny"),
                [],
                NONE,
                f"codex has no per-{dim[:-1]} switch",
            )

    # -- approvals ----------------------------------------------------------------------------
    mode_args: list[str] = []
    if sandbox is not None:
        approval = _APPROVAL.get(ctx.tier, "on-request")
        t.permission_mode = f"{sandbox}, approval {approval}"
        mode_args = [f"--sandbox={sandbox}", f'--config=approval_policy="{approval}"']
        t.add(
            "autonomy_tier",
            ctx.tier,
            mode_args,
            STRONG,
            f"sandbox {sandbox}; approvals {approval}",
            requested=ctx.explicit_tier,
        )
    t.args = [*args, *mode_args, *dict.fromkeys(sandbox_cfg), *mcp_args]
    return t


def yolo_defaults(ctx: Context) -> tuple[list[str], str | None]:
    """What ``--full-auto`` used to mean (the flag itself was removed from codex)."""
    return ["--sandbox=workspace-write", '--config=approval_policy="on-request"'], None
