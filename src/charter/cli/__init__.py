"""The ``charter`` command. Thin: parses arguments and calls the packages.

Sub-commands are loaded lazily so ``charter --help`` and ``--version`` import neither
SDKs nor pydantic nor rich.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from charter import __version__

# name -> (module, attribute, short help shown by --help without importing the module)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "policy": ("charter.cli.policy_cmd", "policy", "Explain and show capability policies."),
    "demo": (
        "charter.cli.demo_cmd",
        "demo",
        "Run the end-to-end demo (--policy-only: the policy core).",
    ),
    "persona": (
        "charter.cli.persona_cmd",
        "persona",
        "Validate, list and inspect personas (charter.toml, persona files, .personas/).",
    ),
    "init": ("charter.cli.init_cmd", "init", "Scaffold charter.toml and .personas/ here."),
    "approve": ("charter.cli.approve_cmd", "approve", "Approve a pending call of a persona run."),
    "deny": ("charter.cli.approve_cmd", "deny", "Deny a pending call of a persona run."),
    "serve": (
        "charter.cli.serve_cmd",
        "serve",
        "Run personas continuously: schedules, webhooks, handoffs, GET /status.",
    ),
    "console": (
        "charter.cli.console_cmd",
        "console",
        "Serve the supervision console alone for a state dir or a PostgreSQL URL.",
    ),
    "launch": (
        "charter.cli.launch_cmd",
        "launch",
        "Start claude, codex, gemini or opencode as a persona, its policy enforced.",
    ),
    "print-policy": (
        "charter.cli.launch_cmd",
        "print_policy",
        "How a persona's policy is enforced by a coding CLI (or --matrix).",
    ),
    "print-overlay": (
        "charter.cli.launch_cmd",
        "print_overlay",
        "Print the instructions file a coding CLI reads for a persona.",
    ),
    "which": (
        "charter.cli.launch_cmd",
        "which",
        "Which persona folder a name resolves to, and why.",
    ),
    "recover": (
        "charter.cli.launch_cmd",
        "recover",
        "Restore instructions files after a crashed swap-mode launch.",
    ),
    "doctor": (
        "charter.cli.launch_cmd",
        "doctor",
        "Check coding CLIs, namespaces, persona folders.",
    ),
}


class LazyGroup(click.Group):
    """A group whose sub-commands are imported only when they are invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module = importlib.import_module(spec[0])
        command: click.Command = getattr(module, spec[1])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, spec[2]) for name, spec in sorted(_COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="charter")
def cli() -> None:
    """charter: personas with enforced charters for AI agents."""


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="charter")


__all__ = ["cli", "main"]
