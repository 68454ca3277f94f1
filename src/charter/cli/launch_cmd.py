"""``charter launch|print-policy|print-overlay|which|recover|doctor``.

Kept light: charter.launch imports neither pydantic nor an SDK, so ``launch --dry-run`` and
``print-policy`` start fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from charter.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_DENIED,
    EXIT_FAILED,
    emit_json,
    fail,
    global_manifest,
)

F = TypeVar("F", bound=Callable[..., Any])
_PASS = {"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}


def _selection(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--manifest", metavar="PATH", help="charter.toml, persona file or folder."
            ),
            click.option(
                "--prefer",
                type=click.Choice(["repo", "home"]),
                help="Which persona folder wins: the repo's (default) or ~/.personas "
                "(env CHARTER_PERSONA_PREFER).",
            ),
        ]
    ):
        func = option(func)
    return func


def _launch_options(func: F) -> F:
    for option in reversed(
        [
            click.option(
                "--meta",
                type=click.Choice(["top", "bottom"]),
                default="top",
                show_default=True,
                help="Where the repo-wide meta file goes in the overlay.",
            ),
            click.option("--no-meta", is_flag=True, help="Leave the meta file out."),
            click.option("--no-mcp", is_flag=True, help="Do not inject the persona's MCP servers."),
            click.option(
                "--strict-policy",
                is_flag=True,
                help="Refuse to launch when any policy element cannot be fully enforced.",
            ),
            click.option(
                "--sandbox",
                type=click.Choice(["auto", "always", "never"]),
                default=None,
                help="Wrap the CLI in charter's OS sandbox: auto (default: where the CLI "
                "cannot enforce a path or network element), always, or never.",
            ),
            click.option(
                "--run-mode",
                type=click.Choice(["unshare", "swap"]),
                help="unshare (default on Linux) or swap (env CHARTER_RUN_MODE).",
            ),
        ]
    ):
        func = option(func)
    return _selection(func)


def _manifest(kw: dict[str, Any]) -> str | None:
    given = kw.get("manifest")
    chosen = global_manifest(Path(given) if given else None)
    return str(chosen) if chosen is not None else None


def _option_values(kw: dict[str, Any]) -> dict[str, Any]:
    return {
        "manifest": _manifest(kw),
        "prefer": kw.get("prefer"),
        "meta": "none" if kw.get("no_meta") else kw.get("meta", "top"),
        "mcp": not kw.get("no_mcp", False),
        "strict": bool(kw.get("strict_policy", False)),
        "run_mode": kw.get("run_mode"),
        "sandbox": kw.get("sandbox"),
    }


def _fast_exit(code: int) -> NoReturn:
    """Exit without tearing the interpreter down: module and object clean-up costs a
    launch about 15 ms after the tool has already exited, and a launch has nothing that
    needs it (its temp files are removed in ``finally`` blocks, its threads are daemons).
    ``atexit`` handlers still run and stdio is flushed. Only when charter is the process
    (the console script); called in-process (tests, ``main([...])``) it raises
    ``SystemExit`` as usual."""
    from charter.cli import _common

    if not _common.OWNS_PROCESS:
        sys.exit(code)
    import atexit

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is not None:
        run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or EXIT_FAILED  # output lost (a closed pipe): say so
    os._exit(code)


def _strip_dashdash(args: tuple[str, ...]) -> tuple[str, ...]:
    return args[1:] if args[:1] == ("--",) else args


def _prepare(
    tool: str, persona: str, user_args: tuple[str, ...], kw: dict[str, Any]
) -> tuple[dict[str, Any], Any]:
    """The plan as a dict and the runnable job: from the launch cache when it is still
    valid (no policy or manifest import at all), else built and then cached."""
    import os

    from charter.launch import cache
    from charter.launch.job import Job, new_tmpdir

    env = dict(os.environ)
    values = _option_values(kw)
    euid = os.geteuid() if hasattr(os, "geteuid") else 1000
    tmpdir = new_tmpdir(tool.strip().lower(), euid)
    key = cache.inputs(tool, persona, user_args, values, env, os.getcwd())
    if cache.enabled(env):
        hit = cache.lookup(key, env, tmpdir)
        if hit is not None:
            return hit["plan"], Job.from_cache(hit["job"], tmpdir, env)

    from charter.cli import gc_paused

    with gc_paused():  # the policy core and the manifest loader: imports, dataclasses
        from charter.launch import LaunchError
        from charter.launch.plan import LaunchOptions, build_plan, dependencies

        opts = LaunchOptions(
            tool=tool, persona=persona, user_args=user_args, env=env, tmpdir=tmpdir, **values
        )
        try:
            plan = build_plan(opts)
        except LaunchError as exc:
            click.echo(f"charter: {exc}", err=True)
            sys.exit(exc.code)
        except OSError as exc:  # an unreadable file, a path too long: one line, exit 2
            click.echo(f"charter: {tool}: {' '.join(str(exc).split())}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        data = plan.to_dict()
        job = plan.job()
        if cache.enabled(env):
            deps = dependencies(plan)
            cache.store(key, env, {"plan": data, "job": job.to_cache()}, deps, tmpdir)
    return data, job


@click.command(context_settings=_PASS)
@click.argument("tool")
@click.argument("persona")
@_launch_options
@click.option(
    "--dry-run", is_flag=True, help="Print the final argv and environment; start nothing."
)
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: the plan as JSON.")
@click.argument("tool_args", nargs=-1, type=click.UNPROCESSED)
def launch(
    tool: str,
    persona: str,
    dry_run: bool,
    as_json: bool,
    tool_args: tuple[str, ...],
    **kw: Any,
) -> None:
    """Start TOOL (claude, codex, gemini, opencode) as PERSONA; tool args go after --."""
    from charter.launch.render import refusals, render_plan, render_refusal

    data, job = _prepare(tool, persona, _strip_dashdash(tool_args), kw)
    refused = bool(data["strict_policy"]) and bool(refusals(data))
    if dry_run:
        if as_json:
            emit_json(data)
        else:
            click.echo(render_plan(data), nl=False)
        if refused:
            click.echo(render_refusal(data), err=True)
        _fast_exit(EXIT_DENIED if refused else 0)
    if refused:
        click.echo(render_refusal(data), err=True)
        sys.exit(EXIT_DENIED)
    from charter.launch.errors import LaunchError
    from charter.launch.render import QUIET_ENV, launch_notices
    from charter.launch.runner import execute, exit_like

    if os.environ.get(QUIET_ENV, "") in ("", "0"):
        for line in launch_notices(data):
            click.echo(line, err=True)
    try:
        status = execute(job)
    except LaunchError as exc:
        click.echo(f"charter: {exc}", err=True)
        sys.exit(exc.code)
    except Exception as exc:  # an unforeseen failure is one line and exit 2, never a traceback
        detail = " ".join(str(exc).split()) or type(exc).__name__
        click.echo(f"charter: {job.tool}: the launch failed: {detail}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    _fast_exit(exit_like(status))


@click.command("print-policy", context_settings=_PASS)
@click.argument("tool", required=False)
@click.argument("persona", required=False)
@_launch_options
@click.option("--json", "as_json", is_flag=True, help="Stable JSON.")
@click.option("--matrix", is_flag=True, help="The enforcement matrix (markdown) of every CLI.")
@click.argument("tool_args", nargs=-1, type=click.UNPROCESSED)
def print_policy(
    tool: str | None,
    persona: str | None,
    as_json: bool,
    matrix: bool,
    tool_args: tuple[str, ...],
    **kw: Any,
) -> None:
    """How PERSONA's policy is enforced by TOOL: translation, strength, final argv, gaps."""
    if matrix:
        from charter.launch.matrix import matrix as build
        from charter.launch.matrix import render_markdown

        if as_json:
            emit_json(build())
        else:
            click.echo(render_markdown(), nl=False)
        return
    if not tool or not persona:
        fail("print-policy needs TOOL and PERSONA (or --matrix)", EXIT_BAD_INPUT, as_json=as_json)
    from charter.launch.render import render_plan

    data, _job = _prepare(tool, persona, _strip_dashdash(tool_args), kw)
    if as_json:
        emit_json(data)
    else:
        click.echo(render_plan(data), nl=False)
    _fast_exit(0)


@click.command("print-overlay")
@click.argument("tool")
@click.argument("persona")
@_selection
@click.option("--meta", type=click.Choice(["top", "bottom"]), default="top", show_default=True)
@click.option("--no-meta", is_flag=True)
def print_overlay(tool: str, persona: str, meta: str, no_meta: bool, **kw: Any) -> None:
    """Print the instructions file TOOL would read when launched as PERSONA."""
    from charter.launch import (
        LaunchError,
        OverlayError,
        ResolveError,
        compose,
        get_cli,
        resolve_persona,
    )

    spec = get_cli(tool)
    if spec is None:
        click.echo(f"charter: unknown tool {tool!r}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    try:
        resolved = resolve_persona(persona, manifest=_manifest(kw), prefer=kw.get("prefer"))
        overlay = compose(
            resolved.persona,
            resolved.manifest,
            spec.name,
            spec.overlay_file,
            meta="none" if no_meta else meta,
        )
    except (ResolveError, OverlayError, LaunchError) as exc:
        click.echo(f"charter: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    for warning in overlay.warnings:
        click.echo(f"charter: warning: {warning}", err=True)
    click.echo(overlay.text, nl=False)


@click.command()
@click.argument("persona")
@_selection
@click.option("--json", "as_json", is_flag=True)
def which(persona: str, as_json: bool, **kw: Any) -> None:
    """Which persona folder / manifest entry PERSONA resolves to, and why."""
    from charter.launch import ResolveError, resolve_persona

    try:
        resolved = resolve_persona(persona, manifest=_manifest(kw), prefer=kw.get("prefer"))
    except ResolveError as exc:
        click.echo(f"charter: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    if as_json:
        emit_json(resolved.to_dict())
        return
    click.echo(f"{resolved.persona.name}: {resolved.path}")
    for line in resolved.why:
        click.echo(f"  {line}")
    click.echo(
        "  searched: "
        + (
            ", ".join(f"{p} ({o})" for p, o in resolved.manifest.persona_roots)
            or "(no persona folders)"
        )
    )


@click.command()
@click.argument("directory", required=False)
@click.option("--json", "as_json", is_flag=True)
def recover(directory: str | None, as_json: bool) -> None:
    """Restore instructions files a crashed swap-mode launch left behind."""
    import os

    from charter.launch.job import temp_base
    from charter.launch.runner import clean_stale_tmpdirs
    from charter.launch.swap import recover as do_recover

    done = do_recover(directory)
    euid = os.geteuid() if hasattr(os, "geteuid") else 1000
    removed = clean_stale_tmpdirs(temp_base(euid))
    if as_json:
        emit_json({"restored": done, "temp_dirs_removed": removed})
        return
    if not done and not removed:
        click.echo("nothing to recover")
    for item in done:
        click.echo(f"{item['target']}: {item['action']}")
    for path in removed:
        click.echo(f"removed stale temp dir {path}")


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--repo",
    "repository",
    default=None,
    metavar="OWNER/NAME",
    help="Also check that the GitHub App is installed on this repository.",
)
def doctor(as_json: bool, repository: str | None) -> None:
    """Check the coding CLIs, namespaces, bubblewrap, the persona folders, and the
    GitHub, Slack and PagerDuty credentials (valid, scopes, App installation, webhook
    secret)."""
    from charter.launch.doctor import checks
    from charter.tools.doctor import checks as integration_checks

    results = checks() + integration_checks(repository=repository)
    if as_json:
        emit_json(results)
    else:
        for item in results:
            mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[item["status"]]
            click.echo(f"[{mark}] {item['check']}: {item['detail']}")
    sys.exit(EXIT_FAILED if any(r["status"] == "fail" for r in results) else 0)
