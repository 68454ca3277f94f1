"""``charter audit verify|export|checkpoint|keygen``: hash chains and signed heads."""

from __future__ import annotations

import json
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


@click.group("audit")
def audit() -> None:
    """Verify or export the event log's hash chains (one per persona)."""


@audit.command("verify")
@click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://...")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir.")
@click.option(
    "--key",
    default=None,
    metavar="PUBLIC_KEY",
    help="Ed25519 public key (hex, base64, PEM, or a file): also check signed checkpoints.",
)
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def verify_cmd(
    state_url: str | None, state_dir: Path | None, key: str | None, as_json: bool
) -> None:
    """Recompute every chain from event 1: exit 0 intact, 1 with the first bad event named.

    With --key, every checkpoint must be signed by that key over the heads the log
    really has, and at least one must exist.
    """
    from charter.runtime.audit import verify
    from charter.runtime.signing import SigningError, load_public_key

    public = None
    if key is not None:
        try:
            public = load_public_key(key)
        except SigningError as exc:
            fail(str(exc), EXIT_BAD_INPUT, field_path="--key")
    log = _log(state_url, state_dir)
    try:
        report = verify(log, key=public)
    finally:
        log.close()
    if as_json:
        emit_json(report.to_dict())
    elif report.ok:
        signed = report.signatures or {}
        click.echo(
            f"ok: {report.chained} chained event(s) link up to event {report.last_event_id}"
            + (
                f" ({report.unchained} older event(s) predate the chain)"
                if report.unchained
                else ""
            )
            + f" in {report.chains} persona chain(s)"
            + (
                f" (events up to {report.legacy_through} on the topic-wide chain of an older log)"
                if report.legacy_through
                else ""
            )
            + f"; head {report.head}"
            + (
                f"; signed through event {signed['signed_through']} "
                f"({signed['valid']} checkpoint(s))"
                if signed
                else ""
            )
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
@click.option("--run", "run_id", default=None, help="Only the events of this run id.")
@click.option("--since", "since_text", default=None, metavar="RFC3339", help="Occurred at/after.")
@click.option("--until", "until_text", default=None, metavar="RFC3339", help="Occurred before.")
def export_cmd(
    state_url: str | None,
    state_dir: Path | None,
    since_event_id: int,
    run_id: str | None,
    since_text: str | None,
    until_text: str | None,
) -> None:
    """Events with their chain hashes, one JSON object per line.

    Each line keeps its ``chain`` value, so a copy can be checked against a later
    ``audit verify`` head; --run and --since/--until select a run's receipts or a time
    range (the chain of a selection is checked link by link with the full log).
    """
    from charter.runtime import parse_time
    from charter.runtime.audit import export

    bounds = []
    for name, text in (("--since", since_text), ("--until", until_text)):
        try:
            bounds.append(parse_time(text) if text is not None else None)
        except ValueError as exc:
            fail(f"{name}: {exc}", EXIT_BAD_INPUT, field_path=name)
    since, until = bounds
    log = _log(state_url, state_dir)
    try:
        for row in export(log, after=since_event_id):
            if run_id is not None and row["payload"].get("run_id") != run_id:
                continue
            at = parse_time(row["occurred_at"])
            if (since is not None and at < since) or (until is not None and at >= until):
                continue
            click.echo(json.dumps(row, separators=(",", ":"), sort_keys=True))
    finally:
        log.close()


@audit.command("checkpoint")
@click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://...")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir.")
@click.option("--at", "at_text", default=None, metavar="RFC3339", help="Act as of this time.")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def checkpoint_cmd(
    state_url: str | None, state_dir: Path | None, at_text: str | None, as_json: bool
) -> None:
    """Sign the chains' heads with $CHARTER_AUDIT_SIGNING_KEY (Ed25519) and record it."""
    import os

    from charter.runtime import parse_time
    from charter.runtime.clock import utc_now
    from charter.runtime.signing import SIGNING_KEY_ENV, SigningError, checkpoint, key_from_env

    try:
        key = key_from_env(os.environ)
        at = parse_time(at_text) if at_text is not None else utc_now()
    except SigningError as exc:
        fail(str(exc), EXIT_BAD_INPUT, field_path=SIGNING_KEY_ENV)
    except ValueError as exc:
        fail(f"--at: {exc}", EXIT_BAD_INPUT, field_path="--at")
    if key is None:
        fail(
            f"no signing key: set {SIGNING_KEY_ENV} to an Ed25519 private key "
            "(PEM, or 32 bytes in hex; `charter audit keygen` makes one)",
            EXIT_BAD_INPUT,
            field_path=SIGNING_KEY_ENV,
        )
    log = _log(state_url, state_dir)
    try:
        signed = checkpoint(log, key, at=at)
    except SigningError as exc:
        fail(str(exc))
    finally:
        log.close()
    if as_json:
        emit_json(signed)
    else:
        click.echo(
            f"signed the heads at event {signed['event_id']} ({signed['chains']} chain(s), "
            f"root {signed['root'][:16]}...) as "
            f"checkpoint event {signed['checkpoint_event_id']}; public key {signed['public_key']}"
        )


@audit.command("keygen")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def keygen_cmd(as_json: bool) -> None:
    """Make an Ed25519 key pair for signed checkpoints (hex; keep the private one secret)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from charter.runtime.signing import SIGNING_KEY_ENV, public_key_text

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    ).hex()
    public = public_key_text(key.public_key())
    if as_json:
        emit_json({"private_key": private, "public_key": public})
    else:
        click.echo(f"{SIGNING_KEY_ENV}={private}")
        click.echo(f"# public key, for charter audit verify --key: {public}")
