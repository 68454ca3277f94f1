"""OpenCode: a ``permission`` table (``"*": "deny"`` first for an allow list) and MCP config,
merged into ``OPENCODE_CONFIG_CONTENT``.

Observed with opencode 1.18.33: ``tools: {name: false}`` and ``permission: {name: "deny"}``
remove tools, but ``permission: {name: "allow"}`` alone restricts nothing (the seed's
allow mapping); ``edit: deny`` also hides ``write``; MCP tools are ``<server>_<tool>``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .common import (
    NONE,
    PARTIAL,
    STRONG,
    Context,
    Translation,
    allow_groups_literal,
    literal_denied_servers,
    server_allowed,
    show_rules,
    split_tools,
)

ENV = "OPENCODE_CONFIG_CONTENT"


def _key(tool: str) -> str:
    return "edit" if tool == "write" else tool


def _bash_pattern(rule: str) -> str:
    text = rule.strip()
    if text == "*":
        return "*"
    if text.endswith(":*") or text.endswith(" *"):
        return text[:-2].rstrip() + " *"
    return text


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _user_servers(ctx: Context) -> list[str]:
    found: list[str] = []
    config_home = ctx.env.get("XDG_CONFIG_HOME") or os.path.join(ctx.home, ".config")
    for path in (
        os.path.join(config_home, "opencode", "opencode.json"),
        os.path.join(ctx.workspace, "opencode.json"),
    ):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("mcp"), dict):
            found.extend(str(k) for k in data["mcp"])
    return found


def translate(ctx: Context) -> Translation:
    t = Translation()
    p = ctx.policy
    shown, hidden = split_tools(ctx)
    shown_names = [tool.name for tool in shown]
    hidden_names = [tool.name for tool, _ in hidden]
    shell = "bash" in shown_names
    allow_list = bool(p.tools.allow) or p.side_effect_level is not None
    verdict = {"act_auto": "allow", "shadow": "deny"}.get(ctx.tier, "ask")
    permission: dict[str, Any] = {}
    tools_off: dict[str, bool] = {}
    if allow_list and ctx.has_policy:
        permission["*"] = "deny"
    if ctx.has_policy or ctx.explicit_tier:
        for name in shown_names:
            key = _key(name)
            if ctx.tier == "shadow":
                permission[key] = (
                    "allow"
                    if name in ("read", "glob", "grep", "list", "todowrite", "todoread")
                    else "deny"
                )
            else:
                permission[key] = (
                    verdict
                    if name in ("bash", "edit", "write", "webfetch", "websearch", "task")
                    else "allow"
                )
    for name in hidden_names:
        permission[_key(name)] = "deny"
    if "write" in hidden_names and "edit" in shown_names:
        t.notes.append("opencode's edit permission covers write: edit is denied too")
    reasons = "; ".join(f"{tool.name}: {why}" for tool, why in hidden) or "nothing hidden"
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
                ['permission "*": "deny"'] * (allow_list and ctx.has_policy)
                + [f'permission "{_key(n)}": "deny"' for n in hidden_names],
                STRONG,
                f"denied tools are not offered ({reasons})",
            )

    cmd = p.commands
    if cmd.restricted and shell:
        bash: dict[str, str] = {}
        allowed = allow_groups_literal(cmd)
        if allowed is not None:
            bash["*"] = "deny"
            for r in allowed:
                bash[_bash_pattern(r)] = permission.get("bash", "ask")
                bash[_bash_pattern(r).removesuffix(" *")] = permission.get("bash", "ask")
        for r in cmd.deny:
            bash[_bash_pattern(r)] = "deny"
            bash[_bash_pattern(r).removesuffix(" *")] = "deny"
        permission["bash"] = bash
    if cmd.restricted:
        t.add(
            "commands." + ("allow" if cmd.allow else "deny"),
            "; ".join(
                x
                for x in (show_rules(cmd, "allow") if cmd.allow else "", show_rules(cmd, "deny"))
                if x
            ),
            ["permission.bash patterns"] if shell else [],
            PARTIAL if shell else STRONG,
            "glob patterns over the command line (opencode splits pipelines, but "
            "interpreters are not looked into)"
            if shell
            else "bash is not offered",
        )

    for access in ("read", "write"):
        pr = p.paths.for_access(access)
        file_tools = [
            n
            for n in (("read", "glob", "grep", "list") if access == "read" else ("edit", "write"))
            if n in shown_names
        ]
        for part in ("allow", "deny"):
            if getattr(pr, part):
                t.add(
                    f"paths.{access}.{part}",
                    show_rules(pr, part),
                    [],
                    NONE if (file_tools or shell) else STRONG,
                    "opencode has no path rules a launcher can pass"
                    if (file_tools or shell)
                    else "no tool that touches files is offered",
                )

    net = p.network
    if net.restricted:
        web = [n for n in ("webfetch", "websearch") if n in hidden_names]
        t.add(
            "network.deny" if net.deny else "network.allow",
            "; ".join(
                x
                for x in (show_rules(net, "allow") if net.allow else "", show_rules(net, "deny"))
                if x
            ),
            [f'permission "{n}": "deny"' for n in web],
            PARTIAL if shell or not web else STRONG,
            "only the web tools are restricted: bash can reach the network"
            if shell
            else (
                "web tools removed and bash is not offered"
                if web
                else "opencode cannot restrict single hosts"
            ),
        )

    # -- MCP -------------------------------------------------------------------------------
    mcp: dict[str, Any] = {}
    dropped: list[str] = []
    if ctx.inject_mcp:
        for name, spec in ctx.mcp_servers.items():
            if not server_allowed(ctx, name).allowed:
                dropped.append(name)
                continue
            if "url" in spec:
                mcp[name] = {"type": "remote", "url": spec["url"], "enabled": True}
            else:
                entry: dict[str, Any] = {
                    "type": "local",
                    "command": [str(spec.get("command", "")), *map(str, spec.get("args", []))],
                    "enabled": True,
                }
                if spec.get("env"):
                    entry["environment"] = dict(spec["env"])
                mcp[name] = entry
            t.mcp.append(name)
            if allow_list and ctx.has_policy:
                permission[f"{name}_*"] = verdict if verdict != "deny" else "allow"
    off = list(dict.fromkeys(literal_denied_servers(p) + dropped))
    if p.mcp_servers.allow:
        off.extend(
            s
            for s in _user_servers(ctx)
            if s not in off and s not in mcp and not server_allowed(ctx, s).allowed
        )
    for s in off:
        tools_off[f"{s}_*"] = False
        permission[f"{s}_*"] = "deny"
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
            [f'tools "{s}_*": false' for s in off] or ["(nothing to switch off)"],
            STRONG if (not p.mcp_servers.allow or allow_list) else PARTIAL,
            "denied servers' tools are switched off"
            + (
                ""
                if (not p.mcp_servers.allow or allow_list)
                else "; servers configured outside opencode.json files are not seen"
            ),
        )

    for dim, tool in (("skills", "skill"), ("members", "task")):
        r = getattr(p, dim)
        if r.restricted:
            gone = tool not in shown_names
            t.add(
                dim,
                show_rules(r, "allow") if r.allow else show_rules(r, "deny"),
                [f"{tool} not offered"] if gone else [],
                STRONG if gone else NONE,
                f"{tool} is not offered" if gone else f"opencode has no per-{dim[:-1]} rule",
            )

    if ctx.has_policy or ctx.explicit_tier:
        t.permission_mode = {"act_auto": "allow", "shadow": "read-only"}.get(ctx.tier, "ask")
        t.add(
            "autonomy_tier",
            ctx.tier,
            [f"permission: {t.permission_mode}"],
            STRONG,
            {
                "allow": "what the policy allows runs without a prompt",
                "read-only": "only reading tools are allowed",
                "ask": "opencode asks before edits, commands and fetches",
            }[t.permission_mode],
            requested=ctx.explicit_tier,
        )

    config: dict[str, Any] = {}
    if permission:
        config["permission"] = permission
    if tools_off:
        config["tools"] = tools_off
    if mcp:
        config["mcp"] = mcp
    if config:
        base: dict[str, Any] = {}
        existing = ctx.env.get(ENV)
        if existing:
            try:
                loaded = json.loads(existing)
                base = loaded if isinstance(loaded, dict) else {}
            except ValueError:
                t.notes.append(f"{ENV} in the environment is not JSON; it was replaced")
        t.env[ENV] = json.dumps(_merge(base, config))
    return t


def yolo_defaults(ctx: Context) -> tuple[list[str], str | None]:
    return [], None
