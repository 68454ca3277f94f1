"""``charter audit verify|export``: the event log's hash chain (tamper evidence)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ._common import emit_json, fail


def _log(state_url: str | None, state_dir: Path | None) -> Any:
    from charter.runtime import EventLogError, open_event_log

    try:
        return open_event_log(state_dir=state_dir, url=state_url)
    except EventLogError as exc:
        fail(str(exc))


@click.group("audit")
def audit() -> None:
    """Verify or export the event log's hash chain."""


@audit.command("verify")
@click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://...")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir.")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def verify_cmd(state_url: str | None, state_dir: Path | None, as_json: bool) -> None:
    """Recompute the chain from event 1: exit 0 intact, 1 with the first bad event named."""
    from charter.runtime.audit import verify

    log = _log(state_url, state_dir)
    try:
        report = verify(log)
    finally:
        log.close()
    if as_json:
        emit_json(report.to_dict())
    elif report.ok:
        click.echo(
            f"ok: {report.chained} chained event(s) link up to event {report.last_event_id}"
            + (
                f" ({report.unchained} older event(s) predate the chain)"
                if report.unchained
                else ""
            )
            + f"; head {report.head}"
        )
    else:
        click.echo(f"TAMPERED: first bad event {report.first_bad_event_id}", err=True)
        for problem in report.problems[:20]:
            click.echo(f"  event {problem['event_id']}: {problem['problem']}", err=True)
    raise SystemExit(0 if report.ok else 1)


@audit.command("export")
@click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://...")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir.")
@click.option("--since-event-id", type=click.IntRange(min=0), default=0, help="Only after N.")
def export_cmd(state_url: str | None, state_dir: Path | None, since_event_id: int) -> None:
    """Every event with its chain hash, one JSON object per line."""
    from charter.runtime.audit import export

    log = _log(state_url, state_dir)
    try:
        for row in export(log, after=since_event_id):
            click.echo(json.dumps(row, separators=(",", ":"), sort_keys=True))
    finally:
        log.close()
