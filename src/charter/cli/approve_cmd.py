"""``charter approve RUN_ID CALL_ID`` / ``charter deny RUN_ID CALL_ID``.

Resolve a durable pending approval of an ``act_with_approval`` run (from any process);
the waiting run resumes. ``charter approve`` without arguments lists pending approvals.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from ._common import EXIT_BAD_INPUT, EXIT_FAILED, emit_json, fail

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """A refusal (exit 1) or bad input (exit 2); one JSON error object under ``--json``."""
    fail(message, code)


def _options(func: F) -> F:
    options = [
        click.option("--reason", default=None, help="Why (recorded on the receipt)."),
        click.option("--by", default=None, help="Who decides (default: the current user)."),
        click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://..."),
        click.option(
            "--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir."
        ),
        click.option("--at", "at_text", default=None, metavar="RFC3339", help="Decide as of."),
        click.option("--json", "as_json", is_flag=True, help="Print stable JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _resolve(
    status: str,
    run_id: str,
    call_id: str,
    reason: str | None,
    by: str | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    from charter.run import ApprovalError, resolve_approval
    from charter.runtime import EventLogError, PersonaRuntime, open_event_log, parse_time
    from charter.runtime.clock import utc_now

    try:
        at = parse_time(at_text) if at_text else utc_now()
    except ValueError as exc:
        _fail(f"--at: {exc}", EXIT_BAD_INPUT)
    try:
        log = open_event_log(state_dir=state_dir, url=state_url)
    except EventLogError as exc:
        _fail(str(exc))
    try:
        runtime = PersonaRuntime(log, {}, actor="charter-cli")
        entry = resolve_approval(
            runtime,
            run_id,
            call_id,
            status=status,
            at=at,
            by=by or getpass.getuser(),
            reason=reason,
        )
    except (ApprovalError, EventLogError) as exc:
        _fail(str(exc))
    finally:
        log.close()
    if as_json:
        emit_json(entry)
        return
    click.echo(
        f"{entry['status']} {entry['persona']} {run_id} {call_id} ({entry['tool']}) "
        f"by {entry['by']} receipt={entry['receipt_id']}"
    )


@click.command("approve")
@click.argument("run_id", required=False)
@click.argument("call_id", required=False)
@_options
def approve(
    run_id: str | None,
    call_id: str | None,
    reason: str | None,
    by: str | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Approve a pending call (RUN_ID CALL_ID); without arguments, list pending approvals."""
    if run_id is None:
        _list(state_url, state_dir, as_json)
        return
    if call_id is None:
        _fail("approve needs RUN_ID and CALL_ID", EXIT_BAD_INPUT)
    _resolve("granted", run_id, call_id, reason, by, state_url, state_dir, at_text, as_json)


@click.command("deny")
@click.argument("run_id")
@click.argument("call_id")
@_options
def deny(
    run_id: str,
    call_id: str,
    reason: str | None,
    by: str | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Deny a pending call: it does not execute; the run resumes without it."""
    _resolve("denied", run_id, call_id, reason, by, state_url, state_dir, at_text, as_json)


def _list(state_url: str | None, state_dir: Path | None, as_json: bool) -> None:
    from charter.run import pending_approvals
    from charter.runtime import EventLogError, open_event_log

    try:
        log = open_event_log(state_dir=state_dir, url=state_url)
    except EventLogError as exc:
        _fail(str(exc))
    try:
        pending = pending_approvals(log)
    finally:
        log.close()
    if as_json:
        emit_json({"pending": pending})
        return
    if not pending:
        click.echo("no pending approvals")
    for item in pending:
        click.echo(
            f"{item['persona']} {item['run_id']} {item['call_id']} {item['tool']} "
            f"[{item['side_effect_level']}] stage={item['stage']} args={item['arguments']}"
        )


__all__ = ["approve", "deny"]
