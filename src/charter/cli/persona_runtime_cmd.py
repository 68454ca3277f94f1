"""``charter persona status|tick|trigger|spend|pause|resume|disable|enable`` and
``charter persona supervision tail``: the continuous runtime's commands.

Plain click commands; :func:`register` adds them to the ``persona`` group (which lives in
``persona_cmd.py``). Thin: arguments are parsed here and everything else happens in
:mod:`charter.runtime`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from charter.errors import CharterError
from charter.runtime import (
    DEFAULT_STATE_DIR,
    STATE_URL_ENV,
    ControlReceipt,
    EventLog,
    EventLogError,
    HandoffRoute,
    PersonaRuntime,
    PersonaRuntimeError,
    PersonaRuntimeSpec,
    ReceiptStatus,
    RunReceipt,
    ScheduleError,
    SpecError,
    TriggerError,
    UnknownPersonaError,
    open_event_log,
    parse_metadata,
    parse_time,
    to_ndjson,
)
from charter.runtime.clock import utc_now
from charter.runtime.supervision import follow as follow_feed
from charter.runtime.supervision import tail as tail_feed

from ._common import EXIT_BAD_INPUT, emit_json, fail

if TYPE_CHECKING:
    from charter.manifest import Manifest, ManifestError

F = TypeVar("F", bound=Callable[..., Any])

MANIFEST_NAME = "charter.toml"


# --------------------------------------------------------------------------------------
# charter.manifest -> runtime specs: the runtime takes a small typed input of its own.
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeCatalog:
    personas: dict[str, PersonaRuntimeSpec]
    routes: tuple[HandoffRoute, ...]
    source: Path | None
    # personas left out because their declaration has errors: name -> error lines
    invalid: Mapping[str, tuple[ManifestError, ...]] = field(default_factory=dict)


def catalog_from_manifest(manifest: Manifest) -> RuntimeCatalog:
    """The runtime's view of a validated manifest (personas, budgets, schedules, routes)."""
    from charter.run.session import runtime_specs

    personas, routes = runtime_specs(manifest)
    source = Path(manifest.manifest_path) if manifest.manifest_path else None
    return RuntimeCatalog(personas, routes, source)


def load_runtime_catalog(manifest: Path | None) -> RuntimeCatalog:
    """Load and validate personas with :func:`charter.manifest.load_manifest`.

    A manifest with validation errors is refused (every error printed, exit 1): the
    runtime never acts on a charter that does not check.
    """
    from charter.manifest import load_manifest

    loaded = load_manifest(str(manifest) if manifest is not None else None)
    usable, invalid = loaded.split_invalid()
    if usable.ok and usable.personas:
        catalog = catalog_from_manifest(usable)
        return dataclasses.replace(catalog, invalid=invalid)
    if not loaded.ok:
        lines = [str(err) for err in loaded.errors]
        if not loaded.personas and loaded.manifest_path is None and not lines:
            lines = ["no charter.toml found here or above (pass --manifest)"]
        raise ManifestRefused("\n".join(lines) or "the manifest does not validate")
    if loaded.manifest_path is None and not loaded.personas:
        raise SpecError(f"no {MANIFEST_NAME} found here or above (pass --manifest)")
    return catalog_from_manifest(loaded)


class ManifestRefused(CharterError):
    """The selected manifest has validation errors."""


# --------------------------------------------------------------------------------------
# shared options and plumbing
# --------------------------------------------------------------------------------------


_fail = fail


def _common(func: F) -> F:
    options = [
        click.option(
            "--manifest",
            type=click.Path(path_type=Path),
            default=None,
            help=f"{MANIFEST_NAME} or a directory holding one (default: nearest above).",
        ),
        click.option(
            "--state",
            "state_url",
            default=None,
            metavar="URL",
            help=f"State store URL (postgresql://...); default ${STATE_URL_ENV}, else --state-dir.",
        ),
        click.option(
            "--state-dir",
            type=click.Path(path_type=Path),
            default=None,
            help=f"SQLite state directory (default {DEFAULT_STATE_DIR}).",
        ),
        click.option(
            "--at", "at_text", default=None, metavar="RFC3339", help="Act as of this time."
        ),
        click.option("--json", "as_json", is_flag=True, help="Print stable JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _at(at_text: str | None) -> datetime:
    if at_text is None:
        return utc_now()
    try:
        return parse_time(at_text)
    except ValueError as exc:
        _fail(f"--at: {exc}", EXIT_BAD_INPUT)


def _manifest_from_context(manifest: Path | None) -> Path | None:
    if manifest is not None:
        return manifest
    ctx = click.get_current_context()
    from charter.cli.persona_cmd import selected_manifest

    chosen = selected_manifest(ctx)
    if chosen:
        return Path(chosen)
    for c in (ctx.parent, ctx.find_root()):
        if c is not None and isinstance(c.obj, dict) and c.obj.get("manifest"):
            return Path(c.obj["manifest"])
        if c is not None and c.params.get("manifest"):
            return Path(c.params["manifest"])
    return None


@contextmanager
def _runtime(
    manifest: Path | None, state_url: str | None, state_dir: Path | None
) -> Iterator[PersonaRuntime]:
    try:
        catalog = load_runtime_catalog(_manifest_from_context(manifest))
    except ManifestRefused as exc:
        _fail(str(exc), EXIT_BAD_INPUT, kind="manifest_invalid")
    except (SpecError, ScheduleError) as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    log = _open_log(state_url, state_dir)
    try:
        yield PersonaRuntime(log, catalog.personas, routes=catalog.routes, actor="charter-cli")
    except UnknownPersonaError as exc:
        if exc.name is not None and exc.name in catalog.invalid:
            errors = "\n".join(str(err) for err in catalog.invalid[exc.name])
            _fail(
                f"persona {exc.name!r} does not validate:\n{errors}",
                EXIT_BAD_INPUT,
                kind="manifest_invalid",
            )
        _fail(str(exc), EXIT_BAD_INPUT, kind="unknown_persona")
    except PersonaRuntimeError as exc:
        _fail(str(exc))
    except TriggerError as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    except EventLogError as exc:
        _fail(str(exc))
    finally:
        log.close()


def _open_log(state_url: str | None, state_dir: Path | None) -> EventLog:
    try:
        return open_event_log(state_dir=state_dir, url=state_url)
    except EventLogError as exc:
        _fail(str(exc))


# Outcomes that did not do (or record) the work: the command exits 1 with the receipt
# still printed, so scripts see a refusal without parsing (docs/runtime.md, exit codes).
_REFUSED = frozenset(
    {
        ReceiptStatus.DUPLICATE,
        ReceiptStatus.LEASE_BUSY,
        ReceiptStatus.BUDGET_EXHAUSTED,
        ReceiptStatus.DEAD_LETTERED,
        ReceiptStatus.FAILED,
    }
)


def _print_receipt(receipt: RunReceipt, as_json: bool) -> None:
    """Print ``receipt``; exit 1 when the work was refused or recorded as failed.

    tick/trigger/spend record work done elsewhere, so a completed receipt reads
    "recorded" in human output (the JSON status stays the seed's ``completed``).
    """
    if as_json:
        emit_json(receipt.to_dict())
    else:
        _print_receipt_text(receipt)
    if receipt.status in _REFUSED:
        sys.exit(1)


def _print_receipt_text(receipt: RunReceipt) -> None:
    status = receipt.status.value
    if receipt.status is ReceiptStatus.COMPLETED:
        status = "recorded"
    parts = [status, receipt.persona]
    if receipt.work_key:
        parts.append(receipt.work_key)
    if receipt.run_id:
        parts.append(f"run={receipt.run_id}")
    if receipt.lease:
        parts.append(f"lease={receipt.lease.lease_id}")
    if receipt.budget_receipt_id:
        parts.append(f"budget_receipt={receipt.budget_receipt_id}")
    click.echo(" ".join(parts))
    if receipt.error:
        click.echo(f"  {receipt.error}")


def _refused(receipt: ControlReceipt) -> bool:
    """A control the persona's state refuses (pausing or resuming a disabled persona):
    exit 1 with the receipt printed, as for refused work. Asking for the state a persona
    is already in (a second pause) is not a refusal."""
    return not receipt.changed and receipt.lifecycle == "disabled" and receipt.action != "disable"


def _print_control(receipt: ControlReceipt, as_json: bool) -> None:
    if as_json:
        emit_json(receipt.to_dict())
        return
    verb = receipt.action if receipt.changed else f"{receipt.action}: no change"
    click.echo(f"{receipt.persona}: {verb} -> {receipt.lifecycle}")
    if receipt.message:
        click.echo(f"  {receipt.message}")
    for item in receipt.drained:
        click.echo(f"  drained {item.status.value} {item.work_key}")


# --------------------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------------------


@click.command("status")
@click.argument("name")
@_common
def status_cmd(
    name: str,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Show a persona's runtime status (a projection of the event log)."""
    at = _at(at_text)
    with _runtime(manifest, state_url, state_dir) as rt:
        status = rt.status(name, now=at).to_dict()
        rollout = _rollout_status(manifest, name, rt.log)
    if rollout is not None:
        status["rollout"] = rollout
    if as_json:
        emit_json(status)
        return
    budget = status["budget"]
    click.echo(f"{status['name']} {status['version'] or ''}".rstrip())
    click.echo(f"  lifecycle:          {status['lifecycle']}")
    last = status["last_run"]
    click.echo(
        f"  last run:           {last['status']} {last['run_id']} at {last['finished_at']}"
        if last
        else "  last run:           none"
    )
    click.echo(f"  next scheduled run: {status['next_scheduled_run'] or 'none'}")
    for lease in status["leases"]:
        click.echo(
            f"  lease:              {lease['lease_id']} {lease['work_key']} "
            f"held by {lease['holder']} until {lease['expires_at']}"
        )
    spent = budget["spent"]
    click.echo(
        f"  spend:              hour ${spent['hour_usd']:g}, day ${spent['day_usd']:g}, "
        f"{spent['day_tokens']} tokens today"
    )
    if budget["exhaustion_reason"]:
        click.echo(f"  budget exhausted:   {budget['exhaustion_reason']}")
    click.echo(f"  queued:             {status['queue']['count']}")
    click.echo(f"  inbox:              {status['inbox']['count']}")
    click.echo(f"  dead-lettered:      {status['dead_lettered']}")
    if status["last_error"]:
        click.echo(f"  last error:         {status['last_error']}")
    if rollout is not None:
        standing = rollout["standing"]
        tiers = ", ".join(f"{arm} {tier}" for arm, tier in rollout["tiers_now"].items())
        click.echo(
            f"  rollout:            {rollout['mode']}; tiers now {tiers}"
            + (f"; {standing['kind']} to {standing['tier']}" if standing else "")
        )
        last_arm = rollout["last_run"]
        if last_arm:
            click.echo(
                f"  last run arm:       {last_arm['arm']} at {last_arm['tier']}"
                + (f" (cohort {last_arm['cohort']})" if last_arm["cohort"] else "")
            )


def _rollout_status(manifest: Path | None, name: str, log: EventLog) -> dict[str, Any] | None:
    """Rollout arm and earned standing for ``status`` (``None`` without a rollout_policy)."""
    from charter.manifest import load_manifest
    from charter.run.promotion import rollout_status

    chosen = _manifest_from_context(manifest)
    loaded = load_manifest(str(chosen) if chosen is not None else None)
    persona = next((p for p in loaded.personas if p.name == name), None)
    if persona is None or persona.rollout_policy.mode is None:
        return None
    return rollout_status(persona, log)


def _observe_outcome(
    manifest: Path | None,
    rt: PersonaRuntime,
    provider: str,
    kind: str | None,
    metadata: dict[str, str],
    payload: dict[str, Any] | None,
    at: datetime,
) -> None:
    """A recorded trigger that reports an outcome settles earlier proposals (issue 18)."""
    from charter.manifest import load_manifest
    from charter.run.outcomes import outcome_from_trigger
    from charter.run.promotion import observe_trigger

    if outcome_from_trigger(provider, kind, metadata, payload) is None:
        return  # the common case stays as light as it was
    chosen = _manifest_from_context(manifest)
    loaded = load_manifest(str(chosen) if chosen is not None else None)
    observe_trigger(
        rt, list(loaded.personas), provider=provider, kind=kind, metadata=metadata,
        payload=payload, at=at,
    )  # fmt: skip


def _cost_options(func: F) -> F:
    func = click.option("--tokens", type=click.IntRange(min=0), default=0, help="Tokens used.")(
        func
    )
    func = click.option(
        "--cost-usd", type=click.FloatRange(min=0), default=0.0, help="Cost of the run in USD."
    )(func)
    return func


def _run_options(func: F) -> F:
    func = click.option(
        "--error", default=None, help="Record the run as failed with this error (host report)."
    )(func)
    func = click.option(
        "--hold", is_flag=True, help="Keep the lease: the run stays open (receipt 'started')."
    )(func)
    return func


@click.command("tick")
@click.argument("name")
@_cost_options
@_run_options
@_common
def tick_cmd(
    name: str,
    cost_usd: float,
    tokens: int,
    hold: bool,
    error: str | None,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Record a schedule wake whose work ran elsewhere (lease and budget checked; runs nothing)."""
    at = _at(at_text)
    with _runtime(manifest, state_url, state_dir) as rt:
        receipt = rt.tick(name, at=at, cost_usd=cost_usd, tokens=tokens, hold=hold, error=error)
    _print_receipt(receipt, as_json)


@click.command("trigger")
@click.argument("name")
@click.option("--provider", default=None, help="github, linear, slack, or any webhook source.")
@click.option("--kind", default=None, help="Event kind (pull_request, check_run, issue, ...).")
@click.option("--metadata", "metadata", multiple=True, metavar="K=V", help="Trigger metadata.")
@click.option(
    "--payload",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="A trigger envelope {provider, kind, metadata, payload} or a whole webhook body "
    "(then --provider), as `persona run --payload` takes ('-' for stdin).",
)
@click.option("--force", is_flag=True, help="Record a trigger the persona does not declare.")
@_cost_options
@_run_options
@_common
def trigger_cmd(
    name: str,
    provider: str | None,
    kind: str | None,
    metadata: tuple[str, ...],
    payload: Path | None,
    force: bool,
    cost_usd: float,
    tokens: int,
    hold: bool,
    error: str | None,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Record an external trigger, normalised to a work key, and run it."""
    at = _at(at_text)
    try:
        meta = parse_metadata(metadata)
    except TriggerError as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    body = None
    if payload is not None:
        # the same envelopes and webhook bodies `persona run --payload` takes
        from charter.cli.persona_run_cmd import load_trigger_file

        provider, file_kind, file_meta, body = load_trigger_file(payload, provider)
        kind = kind or file_kind
        meta = {**file_meta, **meta}
    if provider is None:
        _fail(
            "persona trigger needs --provider (or a --payload envelope naming one)", EXIT_BAD_INPUT
        )
    with _runtime(manifest, state_url, state_dir) as rt:
        _observe_outcome(manifest, rt, provider, kind, meta, body, at)
        receipt = rt.trigger(
            name,
            provider=provider,
            kind=kind,
            metadata=meta,
            payload=body,
            at=at,
            cost_usd=cost_usd,
            tokens=tokens,
            force=force,
            hold=hold,
            error=error,
        )
    _print_receipt(receipt, as_json)


@click.command("spend")
@click.argument("name")
@click.option("--cost-usd", type=click.FloatRange(min=0), required=True, help="Spend in USD.")
@click.option("--tokens", type=click.IntRange(min=0), default=0, help="Tokens used.")
@_common
def spend_cmd(
    name: str,
    cost_usd: float,
    tokens: int,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Record spend outside a run, under the persona's budget caps."""
    at = _at(at_text)
    with _runtime(manifest, state_url, state_dir) as rt:
        receipt = rt.spend(name, cost_usd=cost_usd, tokens=tokens, at=at)
    _print_receipt(receipt, as_json)


def _control_command(action: str, help_text: str) -> click.Command:
    @click.command(action, help=help_text)
    @click.argument("name")
    @_common
    def command(
        name: str,
        manifest: Path | None,
        state_url: str | None,
        state_dir: Path | None,
        at_text: str | None,
        as_json: bool,
    ) -> None:
        at = _at(at_text)
        with _runtime(manifest, state_url, state_dir) as rt:
            receipt: ControlReceipt = getattr(rt, action)(name, at=at)
        _print_control(receipt, as_json)
        if _refused(receipt):
            sys.exit(1)

    return command


pause_cmd = _control_command("pause", "Pause a persona: incoming work is queued.")
resume_cmd = _control_command("resume", "Resume a paused persona and drain its queue once.")
disable_cmd = _control_command("disable", "Disable a persona: later work is dead-lettered.")
enable_cmd = _control_command("enable", "Re-enable a disabled persona.")


@click.group("supervision")
def supervision() -> None:
    """The supervision feed of persona.runtime.events."""


@supervision.command("tail")
@click.option("--persona", default=None, help="Only this persona's updates.")
@click.option(
    "--since-event-id", type=click.IntRange(min=0), default=0, help="Strictly after this id."
)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N lines.")
@click.option("--follow", "follow_mode", is_flag=True, help="Wait for new appends.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="With --follow: exit after this many seconds without a new line.",
)
@_common
def tail_cmd(
    persona: str | None,
    since_event_id: int,
    limit: int | None,
    follow_mode: bool,
    timeout: float | None,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
) -> None:
    """Print the feed as NDJSON (one persona/update frame per line).

    ``--json`` is accepted for uniformity; the output is always NDJSON.
    """
    if at_text is not None:
        _at(at_text)  # validated for uniformity; the feed itself is not time-dependent
    log = _open_log(state_url, state_dir)
    try:
        if not follow_mode:
            for frame in tail_feed(
                log, persona=persona, since_event_id=since_event_id, limit=limit
            ):
                click.echo(to_ndjson(frame))
            return
        for frame in follow_feed(
            log, persona=persona, since_event_id=since_event_id, limit=limit, idle_timeout=timeout
        ):
            click.echo(to_ndjson(frame))
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    except EventLogError as exc:
        _fail(str(exc))
    finally:
        log.close()


COMMANDS: tuple[click.Command, ...] = (
    status_cmd,
    tick_cmd,
    trigger_cmd,
    spend_cmd,
    pause_cmd,
    resume_cmd,
    disable_cmd,
    enable_cmd,
)


def register(group: click.Group) -> None:
    """Add the runtime commands (and the ``supervision`` sub-group) to ``group``."""
    for command in COMMANDS:
        group.add_command(command)
    group.add_command(supervision)


__all__ = ["COMMANDS", "RuntimeCatalog", "load_runtime_catalog", "register", "supervision"]
