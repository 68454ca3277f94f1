"""``charter persona eval NAME``: run the persona's eval packs and judge what it did.

Each eval runs the persona on its fixture in a scratch copy of the project (its own
state and workspace; the mock provider with the eval's script unless ``--llm`` names
another), then checks the run record. Prints a table; exits 1 when an eval fails, 2 for
bad input (unknown persona, broken manifest or eval file); ``--json`` prints the results
(or the error) as JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ._common import EXIT_BAD_INPUT, EXIT_FAILED, check_llm, emit_json, fail
from .persona_cmd import load_selected, manifest_option


@click.command("eval")
@click.argument("name")
@manifest_option
@click.option(
    "--llm",
    default=None,
    metavar="PROVIDER",
    callback=check_llm,
    help="Model provider for every eval (e.g. openai, anthropic, mock:FILE); default: the "
    "mock provider with each eval's own `mock` script.",
)
@click.option("--only", "only", multiple=True, metavar="EVAL", help="Run only these evals.")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
@click.pass_context
def eval_cmd(
    ctx: click.Context, name: str, llm: str | None, only: tuple[str, ...], as_json: bool
) -> None:
    """Run NAME's eval packs (evals/<pack>.toml): fixture in, checks on the run record."""
    from charter.run.evals import EvalError, cases_for, run_case

    loaded = load_selected(ctx)
    manifest, invalid = loaded.split_invalid()
    if name in invalid or not manifest.ok:
        errors = invalid.get(name) or loaded.errors
        fail("\n".join(str(e) for e in errors), EXIT_BAD_INPUT, kind="manifest_invalid")
    persona = manifest.get(name)
    if persona is None:
        known = ", ".join(manifest.names) or "none"
        fail(f"unknown persona {name!r}; known personas: {known}", EXIT_BAD_INPUT,
             kind="unknown_persona")  # fmt: skip
    if not persona.entry_workflow.runnable:  # its evals are that host's (manifest.harn#run)
        fail(
            f"persona {name!r}: {persona.entry_workflow.foreign_message}; its eval packs "
            "belong to that host",
            EXIT_BAD_INPUT,
            kind="foreign_workflow",
        )
    # the project directory, where `persona check` also looks for evals/<pack>.toml
    project = Path(manifest.root) if manifest.root else Path.cwd()
    try:
        cases = [c for c in cases_for(persona, project) if not only or c.name in only]
    except EvalError as exc:
        fail(str(exc), EXIT_BAD_INPUT, kind="eval_invalid")
    if not cases:
        fail(f"{name}: no eval packs to run (declare them in `evals = [...]`)", EXIT_BAD_INPUT)
    outcomes = [run_case(case, project, llm=llm) for case in cases]
    passed = all(o.passed for o in outcomes)
    if as_json:
        emit_json({"persona": name, "passed": passed, "evals": [o.to_dict() for o in outcomes]})
    else:
        _table(outcomes)
    sys.exit(0 if passed else EXIT_FAILED)


def _table(outcomes: list[Any]) -> None:
    rows = [("EVAL", "RESULT", "CHECKS")]
    for o in outcomes:
        ok = sum(1 for c in o.checks if c.ok)
        rows.append((o.case.name, "pass" if o.passed else "FAIL", f"{ok}/{len(o.checks)}"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        click.echo("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    for o in outcomes:
        if o.error:
            click.echo(f"{o.case.name}: error: {o.error}")
        for c in o.checks:
            if not c.ok:
                click.echo(f"{o.case.name}: {c.key}: expected {c.expected!r}, got {c.actual!r}")


def register(group: click.Group) -> None:
    """Attach ``eval`` to the ``persona`` group."""
    group.add_command(eval_cmd)


__all__ = ["eval_cmd", "register"]
