"""Human-readable renderings: ``print-policy``, ``launch --dry-run``, the enforcement matrix."""

from __future__ import annotations

import re
from typing import Any

_SAFE = re.compile(r"[\w@%+=:,./-]+", re.ASCII)


def _quote(arg: str) -> str:
    """Shell quoting as :func:`shlex.quote` does it (without importing shlex)."""
    if arg and _SAFE.fullmatch(arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def _args(items: list[str] | tuple[str, ...]) -> str:
    return " ".join(_quote(a) for a in items) or "(none)"


def refusals(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Requested elements the CLI cannot fully enforce (what ``--strict-policy`` refuses)."""
    return [e for e in d["elements"] if e["requested"] and e["strength"] != "strong"]


#: Set (to anything but "" or "0") to silence :func:`launch_notices` on stderr.
QUIET_ENV = "CHARTER_LAUNCH_QUIET"


def launch_notices(d: dict[str, Any]) -> list[str]:
    """The stderr lines a real launch prints before the CLI starts.

    With a policy, flags that could override it are removed even without --strict-policy
    (agent-persona kept them); say which, once, so a switching user is not surprised.
    Unknown ``{{placeholders}}`` in the instructions are named too.
    """
    out: list[str] = []
    removed = [" ".join(f["args"]) for f in d["args"]["filtered"]]
    if removed:
        out.append(
            "charter: removed arguments that would override the persona's policy: "
            + ", ".join(removed)
            + f" (silence with {QUIET_ENV}=1)"
        )
    out += [f"charter: {d['overlay_file']}: {w}" for w in d.get("overlay_warnings", [])]
    out += [f"charter: {n}" for n in d.get("notes", []) if n.startswith("persona.json defaults[")]
    return out


def render_plan(d: dict[str, Any]) -> str:
    """``print-policy`` / ``launch --dry-run`` text from a plan's :meth:`Plan.to_dict`."""
    strict = bool(d["strict_policy"])
    out = [
        "=== Policy Summary ===",
        "",
        f"Persona:         {d['persona']}",
        f"Tool:            {d['tool']}",
        f"Overlay file:    {d['overlay_file']} (from {d['overlay_source'] or 'description'})",
        f"Autonomy tier:   {d['autonomy_tier']}",
        "OS sandbox:      "
        + (
            f"bubblewrap ({d['sandbox']['mode']}): {len(d['sandbox']['reasons'])} element(s) "
            "the CLI cannot hold alone"
            if d.get("sandbox", {}).get("wrapped")
            else f"none ({d.get('sandbox', {}).get('mode', 'auto')})"
        ),
        f"Permission mode: {d['permission_mode'] or '(CLI default)'}",
        f"Run mode:        {d['run_mode']}",
        "",
        "=== Environment Variables ===",
    ]
    out += [f"{k}={v}" for k, v in d["environment"].items()]
    out += ["", "=== Policy Translation ==="]
    out.append("Source: " + (", ".join(d["policy_source"]) or "(none)"))
    if not d["has_policy"]:
        out.append("No policy: the launcher's permissive defaults apply.")
    for e in d["elements"]:
        out.append("")
        out.append(f"{e['element']}: {e['value']}")
        for item in e["translation"]:
            out.append(f"  -> {item}")
        out.append(f"  [{e['strength']}] {e['reason']}")
    if d["mcp_servers"]:
        out += ["", "MCP servers injected: " + ", ".join(d["mcp_servers"])]
    a = d["args"]
    filtered = ", ".join(" ".join(f["args"]) for f in a["filtered"])
    out += [
        "",
        "=== Final Arguments ===",
        f"Default args:  {_args(a['defaults'])}",
        f"User args:     {_args(a['user'])}" + (f" (filtered: {filtered})" if filtered else ""),
        f"Policy args:   {_args(a['policy'])}",
        "",
        "Final: " + _args(d["argv"]),
    ]
    if d["files"]:
        out += ["", "=== Generated Files ==="]
        for path, text in d["files"].items():
            out.append(f"--- {path}")
            out.append(text.rstrip("\n"))
    out += ["", "=== Enforcement Gaps ==="]
    gaps = d["gaps"]
    if not gaps and not d["notes"]:
        out.append("(none)")
    for e in gaps:
        level = "FAIL" if strict and e["requested"] else "WARN"
        out.append(f"[{level}] {e['element']} ({e['strength']}): {e['reason']}")
    for note in d["notes"]:
        out.append(f"[NOTE] {note}")
    return "\n".join(out) + "\n"


def render_refusal(d: dict[str, Any]) -> str:
    found = refusals(d)
    lines = [
        f"charter: --strict-policy: {d['tool']} cannot fully enforce "
        f"{len(found)} element(s) of persona {d['persona']!r}:"
    ]
    for e in found:
        lines.append(f"  {e['element']} ({e['strength']}): {e['reason']}")
    return "\n".join(lines)
