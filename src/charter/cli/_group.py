"""The click group: sub-commands imported only when they are invoked."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from charter import __version__

from ._commands import COMMANDS, MANIFEST_HELP, SUMMARY


class LazyGroup(click.Group):
    """A group whose sub-commands are imported only when they are invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module = importlib.import_module(spec[0])
        command: click.Command = getattr(module, spec[1])
        return command

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """As click's, except that under ``--json`` a usage error (an unknown option, a bad
        option value, a missing argument) is one JSON error object on stdout, exit 2, as
        every other refusal is (README, "Exit codes")."""
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode or "--json" not in argv:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        try:
            return super().main(argv, prog_name, complete_var, False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            from ._common import emit_error

            kind = "bad_input" if exc.exit_code == 2 else "refused"
            emit_error(kind, exc.format_message())
            sys.exit(exc.exit_code)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, spec[2]) for name, spec in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _remember_manifest(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    # shared with every sub-command through ctx.meta (the key persona_cmd reads); an
    # option given after the sub-command overrides this one
    if value is not None:
        ctx.meta["charter.manifest"] = value


@click.group(cls=LazyGroup, help=SUMMARY, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="charter")
@click.option(
    "--manifest",
    metavar="PATH",
    expose_value=False,
    callback=_remember_manifest,
    help=MANIFEST_HELP,
)
def cli() -> None:
    pass
