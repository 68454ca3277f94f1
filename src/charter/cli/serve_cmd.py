"""``charter serve``: the long-running supervisor (schedules, webhooks, handoffs, status)."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path
from typing import Any

import click

from ._common import EXIT_BAD_INPUT, EXIT_FAILED, check_llm, emit_json, global_manifest


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8787, show_default=True, help="0 picks a free port.")
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="PROVIDER=ENVVAR",
    help="Webhook HMAC secret from an environment variable "
    "(default: $CHARTER_WEBHOOK_SECRET_<PROVIDER>).",
)
@click.option("--once", is_flag=True, help="Fire what is due now (or --at), deliver, exit.")
@click.option(
    "--llm", default=None, metavar="PROVIDER", callback=check_llm, help="Model provider for runs."
)
@click.option(
    "--manifest", type=click.Path(path_type=Path), default=None, help="charter.toml or its dir."
)
@click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://...")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir.")
@click.option("--at", "at_text", default=None, metavar="RFC3339", help="Act as of this time.")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the runs as JSON.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker threads running webhook work at once (a run waiting for an approval "
    "parks and holds none).",
)
@click.option(
    "--insecure-accept-unsigned",
    "unsigned",
    multiple=True,
    metavar="PROVIDER",
    help="Accept PROVIDER's webhooks without a signature when no secret is configured "
    "for it (otherwise they are refused, 401).",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=25 * 1024 * 1024,
    show_default=True,
    help="Webhook bodies larger than this are refused (413); 25 MB is GitHub's own cap.",
)
def serve(
    host: str,
    port: int,
    secrets: tuple[str, ...],
    once: bool,
    llm: str | None,
    manifest: Path | None,
    state_url: str | None,
    state_dir: Path | None,
    at_text: str | None,
    as_json: bool,
    workers: int,
    unsigned: tuple[str, ...],
    max_body_bytes: int,
) -> None:
    """Run personas continuously: cron schedules, webhooks on POST /hooks/{provider}
    (each sender's signature verified; refused without a secret unless
    --insecure-accept-unsigned PROVIDER), handoff delivery, GET /status, the
    console (/console), /metrics, /healthz, /readyz. Off loopback, $CHARTER_CONSOLE_TOKENS
    (name:token pairs) is required.

    One line per event on stdout; SIGINT/SIGTERM shut down gracefully.
    """
    import os

    from charter.run import ManifestInvalid, RunError, RunOptions
    from charter.run.serve import Server, serve_once
    from charter.run.web import AccessError
    from charter.runtime import EventLogError, parse_time

    at = None
    if at_text is not None:
        try:
            at = parse_time(at_text)
        except ValueError as exc:
            click.echo(f"error: --at: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
    table: dict[str, str] = {}
    for item in secrets:
        provider, sep, var = item.partition("=")
        if not sep or not provider or not var:
            click.echo(f"error: --secret expects PROVIDER=ENVVAR, got {item!r}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        value = os.environ.get(var)
        if not value:
            click.echo(f"error: --secret {item}: ${var} is not set", err=True)
            sys.exit(EXIT_BAD_INPUT)
        table[provider] = value

    def say(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    options = RunOptions(
        manifest=global_manifest(manifest),
        state_dir=state_dir,
        state_url=state_url,
        at=at,
        llm=llm,
        # leases name the replica that holds them (host and process)
        holder=f"charter-serve@{socket.gethostname()}:{os.getpid()}",
        notify=lambda message: say(message),
    )
    try:
        if once:
            results = serve_once(options, log_line=(lambda _l: None) if as_json else say)
            if as_json:
                emit_json([r.to_dict() for r in results])
            return
        server = Server(
            options,
            host=host,
            port=port,
            secrets=table,
            log_line=say,
            workers=workers,
            max_body_bytes=max_body_bytes,
            insecure_unsigned=unsigned,
        )
    except AccessError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except (ManifestInvalid, RunError, EventLogError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)

    def stop(_signum: int, _frame: Any) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve()


__all__ = ["serve"]
