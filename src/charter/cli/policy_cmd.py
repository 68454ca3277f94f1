"""``charter policy explain|show``."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from charter.cli._common import EXIT_DENIED, EXIT_OK, emit_json, fail_input
from charter.policy import (
    LEVEL_NAMES,
    Frame,
    PolicyError,
    SideEffectLevel,
    ToolAnnotations,
    ToolCall,
    builtin_annotations,
    decide,
    effective,
    load_policy_file,
    make_context,
    render_effective,
)


def _load_frames(files: tuple[str, ...], as_json: bool = False) -> list[Frame]:
    frames: list[Frame] = []
    issues: list[str] = []
    found: list[dict[str, Any]] = []
    for path in files:
        try:
            policy = load_policy_file(path)
        except PolicyError as exc:
            issues.append(exc.render())
            found.extend(
                {"file": exc.source or path, "field_path": i.field_path, "message": i.message}
                for i in exc.issues
            )
            continue
        frames.append(Frame(policy, policy.name or path, "file"))
    if issues:
        fail_input("\n".join(issues), as_json=as_json, issues=found)
    return frames


@click.group()
def policy() -> None:
    """Explain and show capability policies (files are JSON or TOML, bottom frame first)."""


_policy_opt = click.option(
    "--policy",
    "policies",
    multiple=True,
    required=True,
    metavar="FILE",
    help="A policy file (JSON or TOML); repeat to stack frames, bottom first.",
)


@policy.command()
@_policy_opt
@click.option(
    "--tool", required=True, help="Tool name (canonical lower-case; MCP tools as server__tool)."
)
@click.option(
    "--args", "args_json", default="{}", metavar="JSON", help="Call arguments as a JSON object."
)
@click.option("--side-effect", type=click.Choice(LEVEL_NAMES), help="The tool's side-effect level.")
@click.option(
    "--kind", help="The tool's kind (read, search, edit, delete, move, execute, fetch, ...)."
)
@click.option("--path-arg", multiple=True, help="Argument holding a path (read or write by kind).")
@click.option("--read-path-arg", multiple=True, help="Argument holding a path that is read.")
@click.option("--write-path-arg", multiple=True, help="Argument holding a path that is written.")
@click.option("--command-arg", multiple=True, help="Argument holding a shell command line.")
@click.option("--url-arg", multiple=True, help="Argument holding a URL or host.")
@click.option("--skill-arg", multiple=True, help="Argument naming a skill.")
@click.option("--member-arg", multiple=True, help="Argument naming a delegation target.")
@click.option(
    "--capability", multiple=True, help="A capability (namespace.operation) the tool uses."
)
@click.option("--mcp-server", help="The MCP server the tool belongs to.")
@click.option(
    "--workspace",
    type=click.Path(file_okay=False),
    help="Workspace root for relative paths (default: cwd).",
)
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def explain(
    policies: tuple[str, ...],
    tool: str,
    args_json: str,
    side_effect: str | None,
    kind: str | None,
    path_arg: tuple[str, ...],
    read_path_arg: tuple[str, ...],
    write_path_arg: tuple[str, ...],
    command_arg: tuple[str, ...],
    url_arg: tuple[str, ...],
    skill_arg: tuple[str, ...],
    member_arg: tuple[str, ...],
    capability: tuple[str, ...],
    mcp_server: str | None,
    workspace: str | None,
    as_json: bool,
) -> None:
    """Decide one call against a stack of policies. Exit 0 allowed, 3 denied, 2 bad input.

    Well-known tools (bash, read, write, edit, glob, grep, webfetch, ...) carry their
    annotations from charter's catalog; flags override them.
    """
    frames = _load_frames(policies, as_json)
    try:
        arguments: Any = json.loads(args_json)
    except json.JSONDecodeError as exc:
        fail_input(
            f"--args: invalid JSON at column {exc.colno}: {exc.msg}",
            as_json=as_json,
            field_path="--args",
        )
    if not isinstance(arguments, dict):
        fail_input("--args: expected a JSON object", as_json=as_json, field_path="--args")
    if not tool.strip():
        fail_input("--tool: expected a non-blank tool name", as_json=as_json, field_path="--tool")
    base = builtin_annotations(tool) or ToolAnnotations()
    annotations = ToolAnnotations(
        side_effect_level=SideEffectLevel.parse(side_effect)
        if side_effect
        else base.side_effect_level,
        kind=kind or base.kind,
        path_args=path_arg or base.path_args,
        read_path_args=read_path_arg or base.read_path_args,
        write_path_args=write_path_arg or base.write_path_args,
        command_args=command_arg or base.command_args,
        url_args=url_arg or base.url_args,
        mcp_server=mcp_server or base.mcp_server,
        skill_args=skill_arg or base.skill_args,
        member_args=member_arg or base.member_args,
        capabilities=capability or base.capabilities,
    )
    call = ToolCall(tool, arguments, annotations)
    decision = decide(call, frames, context=make_context(workspace))
    if as_json:
        emit_json(decision.to_dict())
    else:
        verdict = decision.outcome.value.upper()
        click.echo(f"{verdict}  {decision.tool}")
        click.echo(f"  reason:    {decision.reason}")
        if decision.frame_index is not None:
            click.echo(
                f"  frame:     #{decision.frame_index} {decision.frame_label} "
                f"[{decision.frame_kind}]"
            )
            click.echo(f"  dimension: {decision.dimension}")
            click.echo(f"  rule:      {decision.rule or '-'}")
    sys.exit(EXIT_OK if decision.allowed else EXIT_DENIED)


@policy.command()
@_policy_opt
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def show(policies: tuple[str, ...], as_json: bool) -> None:
    """Show what a stack of policies allows, dimension by dimension."""
    frames = _load_frames(policies, as_json)
    view = effective(frames)
    if as_json:
        emit_json(view)
    else:
        click.echo(render_effective(view), nl=False)
