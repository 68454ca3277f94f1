"""``charter console``: the supervision console alone (no schedules, no webhooks)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from ._common import EXIT_BAD_INPUT, EXIT_FAILED, global_manifest


@click.command("console")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8788, show_default=True, help="0 picks a free port.")
@click.option("--state", "state_url", default=None, metavar="URL", help="postgresql://...")
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="SQLite dir.")
@click.option(
    "--manifest",
    type=click.Path(path_type=Path),
    default=None,
    help="charter.toml or its dir (budget caps, schedules); default: personas from the log.",
)
def console(
    host: str, port: int, state_url: str | None, state_dir: Path | None, manifest: Path | None
) -> None:
    """Serve the console (fleet, live feed, runs, approvals), /metrics and probes.

    Off loopback, $CHARTER_CONSOLE_TOKENS (name:token pairs) is required; with it set,
    every page and API call needs a token and decisions are recorded under its name.
    """
    import os

    from charter.run import ManifestInvalid, RunError, RunOptions
    from charter.run.web import Access, AccessError, bind_socket, build_app, http_server
    from charter.runtime import EventLogError

    options = RunOptions(
        manifest=global_manifest(manifest), state_dir=state_dir, state_url=state_url
    )
    try:
        access = Access.from_env(os.environ, host=host)
    except AccessError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    try:
        app = build_app(options, access=access)
        sock = bind_socket(host, port)
    except (ManifestInvalid, RunError, EventLogError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    server = http_server(app, sock)

    def stop(_signum: int, _frame: Any) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    name, bound = sock.getsockname()[:2]
    click.echo(f"console on http://{name}:{bound}/console")
    sys.stdout.flush()
    server.run(sockets=[sock])
    sock.close()
    click.echo("stopped")


__all__ = ["console"]
