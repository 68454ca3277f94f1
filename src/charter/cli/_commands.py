"""The sub-command table and the fast ``--help`` / ``--version`` answers.

Nothing here imports click: ``charter --version`` and ``charter --help`` are answered from
this table alone (the command tree, click included, costs more than the interpreter's own
start). :func:`render_help` reproduces click's layout; tests/cli compares the two.
"""

from __future__ import annotations

import os
import sys

from charter import __version__

SUMMARY = "charter: personas with enforced charters for AI agents."

# name -> (module, attribute, short help shown by --help without importing the module)
COMMANDS: dict[str, tuple[str, str, str]] = {
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
    "audit": (
        "charter.cli.audit_cmd",
        "audit",
        "Verify or export the event log's hash chain (tamper evidence).",
    ),
    "inbox": (
        "charter.cli.inbox_cmd",
        "inbox",
        "Items human: handoffs leave for people: list, show, ack.",
    ),
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

MANIFEST_HELP = "charter.toml, a persona file or folder, for every sub-command."

_OPTIONS = [
    ("--version", "Show the version and exit."),
    ("--manifest PATH", MANIFEST_HELP),
    ("-h, --help", "Show this message and exit."),
]


def _columns() -> int:
    """The terminal width the way ``shutil.get_terminal_size`` finds it (without shutil)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def _dl(rows: list[tuple[str, str]], width: int) -> list[str]:
    import textwrap

    first_col = min(max(len(a) for a, _ in rows), 30) + 2
    text_width = max(width - first_col - 2, 10)
    out: list[str] = []
    for term, text in rows:
        lines = textwrap.wrap(text, text_width) or [""]
        if len(term) <= first_col - 2:
            out.append(f"  {term}{' ' * (first_col - len(term))}{lines[0]}")
        else:
            out.append(f"  {term}")
            out.append(f"{'':>{first_col + 2}}{lines[0]}")
        out.extend(f"{'':>{first_col + 2}}{line}" for line in lines[1:])
    return out


def render_help() -> str:
    """``charter --help`` exactly as click would print it."""
    import textwrap

    width = max(min(_columns(), 80) - 2, 50)
    lines = ["Usage: charter [OPTIONS] COMMAND [ARGS]...", ""]
    lines += textwrap.wrap(SUMMARY, width, initial_indent="  ", subsequent_indent="  ")
    lines += ["", "Options:", *_dl(_OPTIONS, width), "", "Commands:"]
    lines += _dl([(name, spec[2]) for name, spec in sorted(COMMANDS.items())], width)
    return "\n".join(lines) + "\n"


def fast_answer(args: list[str]) -> str | None:
    """The output for ``charter --version`` / ``--help`` / ``-h``, or None (use click)."""
    if args == ["--version"]:
        return f"charter, version {__version__}\n"
    if args in (["--help"], ["-h"]):
        return render_help()
    return None
