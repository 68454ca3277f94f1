"""``charter persona rollout report|promote|feedback``: autonomy a persona earns.

``rollout report`` summarises the evidence projection (runs per arm and tier, agreement
with a Wilson interval, denials, approvals, spend); ``promote`` raises the tier of the
arm the rollout mode caps, only when the receipts meet ``[rollout_policy.promotion]``;
``feedback`` records a person's agreement or disagreement with a run's proposal.
Exit codes: 0 ok, 1 refused, 2 bad input. Under ``--json`` an error is one JSON object.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from ._common import EXIT_BAD_INPUT, EXIT_FAILED, emit_json

if TYPE_CHECKING:
    from charter.manifest import Manifest, Persona
    from charter.runtime import EventLog, PersonaRuntime

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str, code: int, as_json: bool, kind: str = "refused", **extra: Any) -> NoReturn:
    if as_json:
        emit_json({"error": {"kind": kind, "message": message, **extra}})
    else:
        click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _options(func: F) -> F:
    options = [
        click.option(
            "--manifest",
            type=click.Path(path_type=Path),
            default=None,
            help="charter.toml or a directory holding one (default: nearest above).",
        ),
        click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://..."),
        click.option(
            "--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir."
        ),
        click.option("--at", "at_text", default=None, metavar="RFC3339", help="As of this time."),
        click.option("--json", "as_json", is_flag=True, help="Print stable JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass
class _Ctx:
    manifest: Manifest
    runtime: PersonaRuntime
    log: EventLog
    at: datetime
    as_json: bool

    def persona(self, name: str) -> Persona:
        for persona in self.manifest.personas:
            if persona.name == name:
                return persona
        known = ", ".join(p.name for p in self.manifest.personas) or "none"
        _fail(f"unknown persona {name!r} (known: {known})", EXIT_BAD_INPUT, self.as_json,
              kind="unknown_persona")  # fmt: skip


def _parse_at(text: str | None, as_json: bool) -> datetime:
    from charter.runtime import parse_time
    from charter.runtime.clock import utc_now

    if text is None:
        return utc_now()
    try:
        return parse_time(text)
    except ValueError as exc:
        _fail(f"--at: {exc}", EXIT_BAD_INPUT, as_json, kind="bad_input", field_path="--at")


@contextmanager
def _open(
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> Iterator[_Ctx]:
    from charter.manifest import load_manifest
    from charter.runtime import EventLogError, PersonaRuntime, open_event_log

    from .persona_runtime_cmd import _manifest_from_context, catalog_from_manifest

    at = _parse_at(at_text, as_json)
    chosen = _manifest_from_context(manifest)
    loaded = load_manifest(str(chosen) if chosen is not None else None)
    if not loaded.ok or (loaded.manifest_path is None and not loaded.personas):
        lines = [str(err) for err in loaded.errors] or ["no charter.toml found (pass --manifest)"]
        _fail("\n".join(lines), EXIT_BAD_INPUT, as_json, kind="manifest_invalid")
    catalog = catalog_from_manifest(loaded)
    try:
        log = open_event_log(state_dir=state_dir, url=state_url)
    except EventLogError as exc:
        _fail(str(exc), EXIT_FAILED, as_json, kind="state_unavailable")
    try:
        runtime = PersonaRuntime(log, catalog.personas, routes=catalog.routes, actor="charter-cli")
        yield _Ctx(loaded, runtime, log, at, as_json)
    except EventLogError as exc:
        _fail(str(exc), EXIT_FAILED, as_json, kind="state_unavailable")
    finally:
        log.close()


def _since(text: str | None, at: datetime, as_json: bool) -> datetime | None:
    from charter.manifest import parse_window
    from charter.runtime import parse_time

    if text is None:
        return None
    try:
        return at - parse_window(text)
    except ValueError:
        pass
    try:
        return parse_time(text)
    except ValueError:
        _fail(
            f"--since: expected a duration (30d, 12h, 2w) or an RFC3339 time, got {text!r}",
            EXIT_BAD_INPUT,
            as_json,
            kind="bad_input",
            field_path="--since",
        )


@click.group("rollout")
def rollout() -> None:
    """Rollout evidence: what a persona proposed, what people did, what it earned."""


@rollout.command("report")
@click.argument("name")
@click.option("--since", default=None, metavar="WHEN", help="30d, 12h, 2w or an RFC3339 time.")
@_options
def report_cmd(
    name: str,
    since: str | None,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Runs per arm and tier, agreement (Wilson 95%), denials, approvals and spend."""
    from charter.run import evidence, promotion

    with _open(manifest, state_url, state_dir, at_text, as_json) as c:
        persona = c.persona(name)
        start = _since(since, c.at, as_json)
        data = promotion.report(persona, evidence.load(c.log, name), c.at, start)
    if as_json:
        emit_json(data)
        return
    _print_report(data)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None, fmt: str = "{:g}") -> str:
    return "-" if value is None else fmt.format(value)


def _print_report(data: dict[str, Any]) -> None:
    rp = data["rollout_policy"]
    click.echo(f"{data['persona']}: rollout report since {data['since']} (at {data['at']})")
    click.echo(
        f"  manifest tier {data['autonomy_tier']}; rollout mode {rp['mode'] or 'none'}, "
        f"percentage {_num(rp['percentage'])}, cohorts {', '.join(rp['cohorts']) or 'all'}"
    )
    standing = data["standing"]
    click.echo(
        "  standing: "
        + (
            f"{standing['kind']} to {standing['tier']} at {standing['at']}"
            if standing
            else "as the manifest says"
        )
        + "; tiers now: "
        + ", ".join(f"{arm} {tier}" for arm, tier in data["tiers_now"].items())
    )
    header = (
        f"  {'arm':<8} {'tier':<18} {'runs':>5} {'agree':>7} {'wilson 95%':>15} "
        f"{'den/run':>8} {'appr +/-':>9} {'ttA s':>7} {'$/run':>9} {'$/agreed':>9}"
    )
    click.echo(header)
    for row in [*data["arms"], {"arm": "total", "tier": "", **data["total"]}]:
        agreement = row["agreement"]
        interval = (
            f"{_pct(agreement['wilson_low'])}-{_pct(agreement['wilson_high'])}"
            if agreement["wilson_low"] is not None
            else "-"
        )
        approvals = f"{row['approvals']['granted']}/{row['approvals']['denied']}"
        click.echo(
            f"  {row['arm']:<8} {row['tier']:<18} {row['runs']:>5} {_pct(agreement['rate']):>7} "
            f"{interval:>15} {_num(row['denials_per_run']):>8} {approvals:>9} "
            f"{_num(row['time_to_approval_s']):>7} {_num(row['cost_per_run'], '{:.4f}'):>9} "
            f"{_num(row['cost_per_agreed_action'], '{:.4f}'):>9}"
        )
    click.echo(
        f"  awaiting outcome: {data['pending_outcomes']}; "
        f"disagreement streak: {data['disagreement_streak']}"
    )
    promo = data["promotion"]
    if promo["criteria"] is None:
        click.echo("  promotion: no [rollout_policy.promotion] criteria in the manifest")
        return
    click.echo(
        f"  promotion ({promo['current_tier'] or 'no capped arm'} -> "
        f"{promo['next_tier'] or 'none'}): {'eligible' if promo['eligible'] else 'not eligible'}"
    )
    for check in promo["checks"]:
        op = ">=" if check["criterion"] in ("min_runs", "min_agreement") else "<="
        actual = "no data" if check["actual"] is None else f"{check['actual']:g}"
        click.echo(
            f"    {'ok ' if check['ok'] else 'NOT'} {check['criterion']}: {actual} "
            f"(needs {op} {check['required']:g})"
        )


@click.command("promote")
@click.argument("name")
@click.option("--to", "to", required=True, metavar="TIER", help="suggest, act_with_approval, ...")
@click.option("--by", default=None, help="Who promotes (default: the current user).")
@_options
def promote_cmd(
    name: str,
    to: str,
    by: str | None,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Raise the rollout arm's tier to TIER, if the receipts meet the promotion criteria."""
    from charter.run import PromotionError, promotion

    with _open(manifest, state_url, state_dir, at_text, as_json) as c:
        persona = c.persona(name)
        try:
            entry = promotion.promote(c.runtime, persona, to, at=c.at, by=by or getpass.getuser())
        except PromotionError as exc:
            code = EXIT_BAD_INPUT if exc.kind == "bad_input" else EXIT_FAILED
            extra = {"checks": exc.details["checks"]} if isinstance(exc.details, dict) else {}
            _fail(str(exc), code, as_json, kind=exc.kind, **extra)
    if as_json:
        emit_json(entry)
        return
    click.echo(f"promoted {name} from {entry['from']} to {entry['to']} (event {entry['event_id']})")
    for check in entry["evidence"]["checks"]:
        click.echo(f"  ok {check['criterion']}: {check['actual']:g} (needs {check['required']:g})")


@click.command("feedback")
@click.argument("run_id")
@click.option("--persona", "name", required=True, help="The persona whose run it was.")
@click.option("--agree/--disagree", default=None, help="Whether the proposal was right.")
@click.option("--note", default=None, help="Why (recorded on the event).")
@click.option("--by", default=None, help="Who judges (default: the current user).")
@_options
def feedback_cmd(
    run_id: str,
    name: str,
    agree: bool | None,
    note: str | None,
    by: str | None,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Record whether RUN_ID's proposal agreed with what people did."""
    from charter.run import PromotionError, promotion

    if agree is None:
        _fail("feedback needs --agree or --disagree", EXIT_BAD_INPUT, as_json, kind="bad_input")
    with _open(manifest, state_url, state_dir, at_text, as_json) as c:
        persona = c.persona(name)
        try:
            entry = promotion.feedback(
                c.runtime, c.log, persona, run_id, agree=agree, at=c.at, note=note,
                by=by or getpass.getuser(),
            )  # fmt: skip
        except PromotionError as exc:
            code = EXIT_BAD_INPUT if exc.kind == "not_found" else EXIT_FAILED
            _fail(str(exc), code, as_json, kind=exc.kind)
    if as_json:
        emit_json(entry)
        return
    verdict = "agreed" if agree else "disagreed"
    click.echo(f"{verdict}: {name} {run_id} (event {entry['event_id']})")
    if entry.get("demoted"):
        d = entry["demoted"]
        click.echo(f"  demoted from {d['from']} to {d['to']}: {d['reason']}")


def register(group: click.Group) -> None:
    """Add ``rollout``, ``promote`` and ``feedback`` to the ``persona`` group."""
    group.add_command(rollout)
    group.add_command(promote_cmd)
    group.add_command(feedback_cmd)


__all__ = ["register"]
