"""``charter inbox list|show|ack``: the items ``human:`` handoffs leave for people."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import click

from ._common import EXIT_BAD_INPUT, emit_json, fail


def _log(state_url: str | None, state_dir: Path | None) -> Any:
    from charter.runtime import EventLogError, open_event_log

    try:
        return open_event_log(state_dir=state_dir, url=state_url)
    except EventLogError as exc:
        fail(str(exc))


_state = [
    click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://..."),
    click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir."),
    click.option("--json", "as_json", is_flag=True, help="Print stable JSON."),
]


def _with_state(func: Any) -> Any:
    for option in reversed(_state):
        func = option(func)
    return func


@click.group("inbox")
def inbox() -> None:
    """Items that handoffs to human:GROUP leave for people (list, show, acknowledge)."""


@inbox.command("list")
@click.option("--group", default=None, help="Only items for human:GROUP.")
@click.option("--all", "show_all", is_flag=True, help="Acknowledged items too.")
@_with_state
def list_cmd(
    group: str | None, show_all: bool, state_url: str | None, state_dir: Path | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Open inbox items, oldest first."""
    from charter.runtime import inbox as box

    log = _log(state_url, state_dir)
    try:
        found = box.items(log, group=group, include_acknowledged=show_all)
    finally:
        log.close()
    if as_json:
        emit_json({"items": found})
        return
    if not found:
        click.echo("no open inbox items" if not show_all else "no inbox items")
    for item in found:
        state = "acknowledged" if item["acknowledged"] else "open"
        click.echo(
            f"{item['item_id']}  human:{item['group']}  {item['kind']} from {item['persona']}"
            f"  {item['created_at']}  {state}"
            + (f"  {item['summary']}" if item.get("summary") else "")
        )


@inbox.command("show")
@click.argument("item_id")
@_with_state
def show_cmd(item_id: str, state_url: str | None, state_dir: Path | None, as_json: bool) -> None:
    """One inbox item: the handoff, its payload and the dispatch that caused it."""
    from charter.runtime import inbox as box

    log = _log(state_url, state_dir)
    try:
        item = box.get(log, item_id)
    except box.InboxError as exc:
        fail(str(exc), EXIT_BAD_INPUT, kind="not_found")
    finally:
        log.close()
    if as_json:
        emit_json(item)
        return
    for key in ("item_id", "group", "kind", "persona", "route_id", "handoff_id", "created_at"):
        click.echo(f"{key + ':':12} {item.get(key)}")
    click.echo(f"{'summary:':12} {item.get('summary') or '-'}")
    click.echo(
        f"{'caused by:':12} event {item['caused_by']['event_id']} ({item['caused_by']['kind']})"
    )
    click.echo(f"{'payload:':12} {item.get('payload')}")
    done = item["acknowledged"]
    click.echo(
        f"{'status:':12} " + (f"acknowledged by {done['by']} at {done['at']}" if done else "open")
    )


@inbox.command("ack")
@click.argument("item_id")
@click.option("--by", default=None, help="Who acknowledges (default: the current user).")
@click.option("--note", default=None, help="Recorded on the event.")
@click.option("--at", "at_text", default=None, metavar="RFC3339", help="As of this time.")
@_with_state
def ack_cmd(
    item_id: str, by: str | None, note: str | None, at_text: str | None,
    state_url: str | None, state_dir: Path | None, as_json: bool,
) -> None:  # fmt: skip
    """Acknowledge an item (once; a second acknowledgement is refused, exit 1)."""
    from charter.runtime import PersonaRuntime, parse_time
    from charter.runtime import inbox as box
    from charter.runtime.clock import utc_now

    try:
        at = parse_time(at_text) if at_text else utc_now()
    except ValueError as exc:
        fail(f"--at: {exc}", EXIT_BAD_INPUT)
    log = _log(state_url, state_dir)
    try:
        entry = box.acknowledge(
            PersonaRuntime(log, {}, actor="charter-cli"), item_id, at=at,
            by=by or getpass.getuser(), note=note,
        )  # fmt: skip
    except box.InboxError as exc:
        missing = str(exc).startswith("no inbox item")
        fail(str(exc), EXIT_BAD_INPUT if missing else 1, kind="not_found" if missing else None)
    finally:
        log.close()
    if as_json:
        emit_json(entry)
        return
    click.echo(f"acknowledged {item_id} by {entry['by']} (event {entry['event_id']})")
