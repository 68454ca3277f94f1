"""``charter persona list|check|inspect|schema``.

The :data:`persona` group is meant to be extended: other modules ``persona.add_command``
their own commands and use :func:`manifest_option` / :func:`load_selected` so that
``--manifest`` works before or after the sub-command everywhere.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from charter.cli._common import EXIT_BAD_INPUT, EXIT_FAILED, emit_json, fail

if TYPE_CHECKING:
    from charter.manifest import Manifest, Persona

F = TypeVar("F", bound=Callable[..., Any])

_META_KEY = "charter.manifest"


def _remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    # The innermost --manifest wins: a sub-command's option overrides the group's.
    if value is not None:
        ctx.meta[_META_KEY] = value
    return value


def manifest_option(func: F) -> F:
    """``--manifest PATH`` on a sub-command (also accepted on the ``persona`` group)."""
    return click.option(
        "--manifest",
        metavar="PATH",
        expose_value=False,
        callback=_remember,
        help="charter.toml, a persona file or folder, or a directory holding one.",
    )(func)


def selected_manifest(ctx: click.Context) -> str | None:
    """The ``--manifest`` given anywhere on the command line (or CHARTER_MANIFEST)."""
    value = ctx.meta.get(_META_KEY)
    return value if isinstance(value, str) else None


def load_selected(ctx: click.Context, *, include_global: bool = True) -> Manifest:
    """Load the manifest ``--manifest`` selects, or the one discovered from the cwd."""
    from charter.manifest import load_manifest

    return load_manifest(selected_manifest(ctx), include_global=include_global)


def report_errors(manifest: Manifest, as_json: bool) -> None:
    """Print every validation error (JSON on stdout, text on stderr) and exit 1."""
    from charter.manifest import manifest_to_dict

    if as_json:
        emit_json(manifest_to_dict(manifest))
    else:
        for err in manifest.errors:
            click.echo(f"error: {err}", err=True)
        n = len(manifest.errors)
        click.echo(f"{n} error{'s' if n != 1 else ''} in persona manifests", err=True)
    sys.exit(EXIT_FAILED)


def require_persona(manifest: Manifest, name: str, as_json: bool) -> Persona:
    """The persona ``name``, or a clear error listing the known names: exit 2, kind
    ``unknown_persona``, as every command answers an unknown persona (issue 31)."""
    persona = manifest.get(name)
    if persona is not None:
        return persona
    known = ", ".join(manifest.names) or "none"
    fail(
        f"unknown persona {name!r}; known personas: {known}",
        EXIT_BAD_INPUT,
        as_json=as_json,
        kind="unknown_persona",
        manifest_path=manifest.manifest_path,
    )


# Runtime and run commands live in their own modules, imported only when one of them is
# used (or listed), so `charter persona list|check|inspect` stays light.
_LAZY_COMMANDS: dict[str, str] = {
    **{
        name: "charter.cli.persona_runtime_cmd"
        for name in (
            "status",
            "tick",
            "trigger",
            "spend",
            "pause",
            "resume",
            "disable",
            "enable",
            "supervision",
        )
    },
    "run": "charter.cli.persona_run_cmd",
    "eval": "charter.cli.persona_eval_cmd",
    **{name: "charter.cli.persona_rollout_cmd" for name in ("rollout", "promote", "feedback")},
}


class _PersonaGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(_LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _LAZY_COMMANDS:
            module = importlib.import_module(_LAZY_COMMANDS[cmd_name])
            module.register(self)
        return self.commands.get(cmd_name)


@click.group(cls=_PersonaGroup)
@click.option(
    "--manifest",
    metavar="PATH",
    envvar="CHARTER_MANIFEST",
    expose_value=False,
    callback=_remember,
    help="charter.toml, a persona file or folder, or a directory holding one "
    "(default: the nearest charter.toml up to the repository root).",
)
def persona() -> None:
    """Validate and inspect personas (charter.toml, persona files, .personas/ folders)."""


@persona.command("list")
@manifest_option
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the personas (validating them first)."""
    from charter.manifest import manifest_to_dict

    loaded = load_selected(ctx)
    # one broken persona does not hide the others: list the valid ones and report the
    # broken ones with their errors (only `check` exits non-zero for them)
    manifest, invalid = loaded.split_invalid()
    if manifest.errors:
        report_errors(loaded, as_json)
    if as_json:
        data = manifest_to_dict(manifest)
        data["ok"] = loaded.ok
        data["errors"] = [err.to_dict() for err in loaded.errors]
        data["invalid_personas"] = {
            name: [err.to_dict() for err in errors] for name, errors in invalid.items()
        }
        emit_json(data)
        return
    if not manifest.personas and not invalid:
        click.echo("no personas found (run `charter init` to create a charter.toml)", err=True)
        return
    rows = [("NAME", "AUTONOMY", "RECEIPTS", "SOURCE")]
    for p in manifest.personas:
        kinds = "+".join(dict.fromkeys(s.kind for s in p.sources if not s.shadowed))
        rows.append((p.name, p.autonomy_tier.value, p.receipt_policy.value, kinds))
    for name in invalid:
        rows.append((name, "INVALID", "-", "see below"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        )
    for name, errors in invalid.items():
        click.echo(f"{name}: left out, {len(errors)} error(s) (charter persona check):", err=True)
        for err in errors:
            click.echo(f"  error: {err}", err=True)


@persona.command("check")
@click.argument("path", required=False)
@manifest_option
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
@click.pass_context
def check_cmd(ctx: click.Context, path: str | None, as_json: bool) -> None:
    """Validate personas; exit 1 listing every error.

    PATH (a charter.toml, persona file or folder, or a directory) checks exactly that
    project; without it the personas the other commands see are checked, including
    CHARTER_PERSONA_PATHS and ~/.personas.
    """
    from charter.cli import gc_paused

    # loading builds many small objects and frees none of them: the cyclic collector's
    # passes over them are about a sixth of a 1,000-persona check (benchmarks/manifest_check.py)
    with gc_paused():
        manifest, warnings = _check_results(ctx, path)
    if manifest.errors:
        report_errors(manifest, as_json)
    if manifest.manifest_path is None and not manifest.personas:
        message = (
            "no charter.toml found (searched from the current directory up to the repository "
            "root) and no persona folders"
        )
        if as_json:
            emit_json(
                {
                    "ok": False,
                    "manifest_path": None,
                    "errors": [
                        {
                            "manifest_path": None,
                            "field_path": "",
                            "message": message,
                            "line": None,
                            "column": None,
                        }
                    ],
                }
            )
        else:
            click.echo(f"error: {message}", err=True)
        sys.exit(EXIT_FAILED)
    if as_json:
        emit_json(
            {
                "ok": True,
                "manifest_path": manifest.manifest_path,
                "personas": list(manifest.names),
                "handoff_routes": [r.id for r in manifest.handoff_routes],
                "triggers": [t.id for t in manifest.triggers],
                "warnings": [text for _, text in warnings],
                "warning_details": [w.to_dict() for w in manifest.warnings],
                "warning_counts": _counts(warnings),
            }
        )
        return
    for line in grouped_warnings(warnings):
        click.echo(f"warning: {line}", err=True)
    n = len(manifest.personas)
    where = manifest.manifest_path or "persona folders"
    click.echo(f"ok: {n} persona{'s' if n != 1 else ''} in {where}: {', '.join(manifest.names)}")


def _check_results(ctx: click.Context, path: str | None) -> tuple[Manifest, list[tuple[str, str]]]:
    """The manifest ``check`` looks at, and its warnings as ``(kind, text)`` (none when
    it has errors)."""
    from charter.manifest import load_manifest
    from charter.manifest.routes import unreachable_steps

    manifest = load_manifest(path, include_global=False) if path is not None else load_selected(ctx)
    if manifest.errors:
        return manifest, []
    kinds = [("unreachable_route_step", w) for w in unreachable_steps(manifest.handoff_routes)]
    kinds.extend(("policy", w) for w in policy_warnings(manifest))
    kinds.extend(("tracked_denied_path", w) for w in tracked_warnings(manifest))
    # valid constructs charter reads differently or cannot act on (another host's entry
    # workflow, [package], triggers no receiver delivers): warnings, exit status still 0
    kinds.extend((w.kind, str(w)) for w in manifest.warnings)
    return manifest, kinds


#: A kind of warning with more than this many is printed as one line with a count.
WARNINGS_SHOWN = 3


def _counts(kinds: list[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for kind, _ in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def grouped_warnings(kinds: list[tuple[str, str]]) -> list[str]:
    """Warning lines, in order: a kind seen a few times prints each; a kind repeated more
    often prints once, its first instance with the count (``--json`` lists them all)."""
    by_kind: dict[str, list[str]] = {}
    for kind, text in kinds:
        by_kind.setdefault(kind, []).append(text)
    out: list[str] = []
    for texts in by_kind.values():
        if len(texts) <= WARNINGS_SHOWN:
            out.extend(texts)
        else:
            out.append(f"{texts[0]} [and {len(texts) - 1} more like it; --json lists all]")
    return out


def policy_warnings(manifest: Manifest) -> list[str]:
    """How the MCP rule widened a policy, and tool names that look like typos."""
    from charter.policy import BUILTIN_TOOLS, unknown_tool_names

    out: list[str] = []
    typos_of: dict[Any, list[str]] = {}  # personas share tool lists: look each up once
    for p in manifest.personas:
        out.extend(f"persona {p.name}: {note}" for note in p.policy_notes)
        # custom tools (registered by workflows) are fine: report only likely typos
        rules = p.effective_policy.tools
        key = (rules.allow, rules.deny)
        if key not in typos_of:
            names = unknown_tool_names(p.effective_policy, BUILTIN_TOOLS)
            typos_of[key] = [t for t in names if "did you mean" in t]
        out.extend(f"persona {p.name}: {t}" for t in typos_of[key])
    return out


def tracked_warnings(manifest: Manifest) -> list[str]:
    """Denied paths the repository of the manifest tracks, per persona (issue 29)."""
    import os

    from charter.sandbox.tracked import tracked_denied, tracked_files, tracked_note

    where = os.path.dirname(manifest.manifest_path) if manifest.manifest_path else os.getcwd()
    out: list[str] = []
    if not manifest.personas or tracked_files(where) is None:
        return out  # not in a repository: nothing to look up per persona
    for p in manifest.personas:
        denied = tracked_denied(p.effective_policy, where)
        if denied:
            out.append(f"persona {p.name}: {tracked_note(denied)}")
    return out


@persona.command("inspect")
@click.argument("name")
@manifest_option
@click.option(
    "--work-key",
    default=None,
    metavar="KEY",
    help="Also show the rollout arm and tier this work key would take.",
)
@click.option(
    "--metadata",
    "metadata",
    multiple=True,
    metavar="K=V",
    help="Trigger metadata for --work-key (cohorts match on it), e.g. repository=org/repo.",
)
@click.option("--provider", default=None, help="Trigger provider for --work-key (github, ...).")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
@click.pass_context
def inspect_cmd(
    ctx: click.Context,
    name: str,
    work_key: str | None,
    metadata: tuple[str, ...],
    provider: str | None,
    as_json: bool,
) -> None:
    """Show one persona: contract, effective policy and where each part came from."""
    from charter.manifest import persona_to_dict

    manifest = load_selected(ctx)
    if manifest.errors:
        report_errors(manifest, as_json)
    persona_obj = require_persona(manifest, name, as_json)
    data = persona_to_dict(persona_obj, manifest)
    if work_key is not None:
        data["rollout_arm"] = _rollout_arm(persona_obj, work_key, metadata, provider, as_json)
    if as_json:
        emit_json(data)
        return
    click.echo(render_persona(data))
    if work_key is not None:
        arm = data["rollout_arm"]
        click.echo(
            f"rollout arm:     {work_key}: {arm['arm']} ({arm['reason']}) -> tier {arm['tier']}"
        )


def _rollout_arm(
    persona_obj: Any,
    work_key: str,
    metadata: tuple[str, ...],
    provider: str | None,
    as_json: bool,
) -> dict[str, Any]:
    """Which arm ``work_key`` falls in, and the tier the manifest gives it (no standing)."""
    from charter.run.rollout import cohort_values, select_arm
    from charter.run.tiers import effective_tier

    pairs: dict[str, str] = {}
    for pair in metadata:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            message = f"--metadata: expected K=V, got {pair!r}"
            if as_json:
                emit_json(
                    {"error": {"kind": "bad_input", "message": message, "field_path": "--metadata"}}
                )
            else:
                click.echo(f"error: {message}", err=True)
            sys.exit(2)
        pairs[key] = value
    arm = select_arm(persona_obj.rollout_policy, work_key, cohort_values(provider, pairs))
    tier, reason = effective_tier(
        persona_obj.autonomy_tier.value, persona_obj.rollout_policy, work_key, arm=arm
    )
    return {**arm.to_dict(), "work_key": work_key, "tier": tier, "tier_reason": reason}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "-"
    if isinstance(value, dict):
        parts = [f"{k}={_fmt(v)}" for k, v in value.items() if v not in (None, [], {})]
        return ", ".join(parts) if parts else "-"
    return str(value)


def _entry_line(data: dict[str, Any]) -> str:
    host = data.get("entry_host", "python")
    extra = "" if host == "python" else f"  (for another host: {host}; persona run refuses it)"
    return f"{'entry_workflow:':<16} {data['entry_workflow']}{extra}"


def _reasoning_line(model: dict[str, Any]) -> str:
    effort = model.get("reasoning_effort")
    if effort is None:
        return f"{'reasoning:':<16} the agent loop's own policy (reasoning_policy auto)"
    options = ", ".join(f"{k}={v}" for k, v in model.get("agent_options", {}).items())
    return f"{'reasoning:':<16} effort {effort} -> agent loop {options}"


def render_persona(data: dict[str, Any]) -> str:
    """Plain text for ``persona inspect``."""
    from charter.policy import render_effective

    lines = [f"{data['name']} {data['version'] or ''}".rstrip(), f"  {data['description']}", ""]
    for key in (
        "owner",
        "autonomy_tier",
        "receipt_policy",
        "tools",
        "capabilities",
        "triggers",
        "schedules",
        "handoffs",
        "context_packs",
        "evals",
        "budget",
        "model_policy",
        "rollout_policy",
        "package_source",
    ):
        if key == "owner":
            lines.append(_entry_line(data))
        lines.append(f"{key + ':':<16} {_fmt(data[key])}")
        if key == "model_policy":
            lines.append(_reasoning_line(data["model_policy"]))
        if key == "rollout_policy" and data[key].get("named_cohorts"):
            names = ", ".join(data[key]["named_cohorts"])
            lines.append(
                f"{'named cohorts:':<16} {names} (work whose metadata says cohort=NAME; "
                "with names only, all work without a cohort)"
            )
    if data.get("capability_tools"):
        lines.append("capabilities and charter tools:")
        for cap in data["capability_tools"]:
            level = cap["side_effect_level"] or "level unknown"
            if not cap["tools"]:
                what = "declared, no tool here"
            elif not cap["tools_allowed"]:
                what = f"tool here: {', '.join(cap['tools'])} (not in this persona's tools)"
            elif cap["tools_allowed"] != cap["tools"]:
                what = f"tool here: {', '.join(cap['tools'])} (allowed: "
                what += f"{', '.join(cap['tools_allowed'])})"
            else:
                what = f"tool here: {', '.join(cap['tools'])}"
            note = f"; in charter: {cap['note']}" if cap["note"] else ""
            lines.append(f"  {cap['capability']} [{level}] {what}{note}")
    if data["stages"]:
        lines.append("stages:")
        for s in data["stages"]:
            tools = "inherit" if s["allowed_tools"] is None else _fmt(s["allowed_tools"]) or "none"
            extra = f", on_exit {_fmt(s['on_exit'])}" if s["on_exit"] else ""
            lines.append(
                f"  {s['name']}: tools {tools}; level {s['side_effect_level'] or 'inherit'}{extra}"
            )
    for route in data.get("handoff_routes", []):
        steps = "; ".join(f"{st['target']} when {st['when']}" for st in route["route"])
        lines.append(f"handoff route {route['id']}: {steps}")
    bindings = data.get("trigger_bindings", [])
    if bindings:
        lines.append(
            "trigger bindings: "
            + ", ".join(f"{b['provider']}.{b['event']} ({b['source']})" for b in bindings)
        )
    if data["instructions"]:
        ins = data["instructions"]
        files = [ins["agents_md"], ins["claude_md"], ins["gemini_md"], ins["persona_json"]]
        lines.append("instructions:   " + ", ".join(f for f in files if f))
    lines.append("sources (first owns the contract):")
    for src in data["sources"]:
        where = f" {src['field_path']}" if src["field_path"] else ""
        origin = f" [{src['origin']}]" if src["origin"] else ""
        state = " (shadowed)" if src["shadowed"] else ""
        lines.append(f"  {src['kind']}: {src['path']}{where}{origin} -> {src['provides']}{state}")
    roots = data.get("persona_roots", [])
    if roots:
        lines.append(
            "persona folder precedence: " + ", ".join(f"{r['path']} [{r['origin']}]" for r in roots)
        )
    lines.append("")
    lines.append("effective policy:")
    lines.extend("  " + line for line in render_effective(data["effective_policy"]).splitlines())
    return "\n".join(lines)


@persona.command("schema")
@click.option(
    "--kind",
    type=click.Choice(["manifest", "persona"]),
    default="manifest",
    show_default=True,
    help="charter.toml, or a standalone persona file.",
)
def schema_cmd(kind: str) -> None:
    """Print the JSON Schema of charter.toml (for editor completion and checking)."""
    from charter.manifest import manifest_schema

    emit_json(manifest_schema(kind))


__all__ = [
    "load_selected",
    "manifest_option",
    "persona",
    "render_persona",
    "report_errors",
    "require_persona",
    "selected_manifest",
]
