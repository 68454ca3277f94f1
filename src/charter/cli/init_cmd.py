"""``charter init [DIR]``: scaffold a charter project. Idempotent; never overwrites a file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from charter.cli._common import EXIT_FAILED, emit_json, fail_input

_MANIFEST = """\
# charter.toml: personas with enforced charters.
# Reference: docs/personas.md; editor schema: `charter persona schema > charter.schema.json`.
# Check it with `charter persona check`.

[[personas]]
name = "{name}"
version = "0.1.0"
description = "Answers questions about this repository and proposes small, reviewed changes."
owner = "you@example.com"
entry_workflow = "workflows/{name}.py:run"
tools = ["read", "glob", "grep", "edit"]
autonomy_tier = "suggest"          # shadow | suggest | act_with_approval | act_auto
receipt_policy = "required"        # required | optional | disabled
triggers = []                      # e.g. ["github.pr_opened"]
schedules = []                     # cron, e.g. ["0 9 * * 1-5"]
handoffs = []                      # persona name, human:group, worker://queue, a2a://endpoint
context_packs = []
evals = []
budget = {{ daily_usd = 1.0, run_usd = 0.25, max_tokens = 200000 }}
model_policy = {{ default_model = "small-model", escalation_model = "large-model" }}
# all work (percentage 100) runs in shadow; add promotion = {{ min_runs = 20,
# min_agreement = 0.7 }} and `charter persona promote` raises the tier once the receipts
# meet it (`charter persona rollout report` shows the numbers)
rollout_policy = {{ mode = "shadow", percentage = 100 }}
stages = [
  {{ name = "research", allowed_tools = ["read", "grep"], side_effect_level = "read_only" }},
  {{ name = "edit", allowed_tools = ["read", "edit"], side_effect_level = "workspace_write" }},
]

# Everything beyond `tools`, in charter's policy vocabulary.
[personas.policy]
paths = {{ allow = ["./"], deny = ["./secrets/**"] }}
network = {{ deny = ["*"] }}
"""

_WORKFLOW = '''\
"""Entry workflow of the {name} persona (charter.toml: entry_workflow)."""

from __future__ import annotations

from typing import Any


def run(ctx: Any) -> dict[str, Any]:
    """Called by the charter runtime with the run context; returns the run's result."""
    return {{"persona": "{name}", "status": "ok"}}
'''

_FOLDER_README = """\
# .personas/

One folder per persona. `AGENTS.md` (required) holds the instructions; `CLAUDE.md` and
`GEMINI.md` override them for those CLIs; `persona.json` may add `defaults` (CLI
arguments), `mcpServers` and a portable `policy` (tools / paths / network / mcpServers /
bash allow and deny).

A folder whose name matches a `[[personas]]` entry in charter.toml gives that persona
its instructions; the manifest entry owns the operational contract (triggers, budget,
autonomy, ...). Folders starting with `_` (like `_shared/`) are not personas.
"""

_SHARED_README = """\
# Shared snippets

Text that several personas include in their AGENTS.md (house rules, repository
conventions). This folder is not a persona.
"""

_AGENTS = """\
# {name}

You help maintainers understand this repository and propose small changes.

- Read before you write; keep diffs minimal.
- Never touch `./secrets/`.
- Ask a human before anything that leaves the workspace.
"""

_PERSONA_JSON = """\
{
  "defaults": {},
  "policy": {
    "tools": { "deny": ["webfetch", "websearch"] },
    "paths": { "deny": ["~/.ssh", "~/.aws", "./secrets/**"] }
  }
}
"""


def scaffold(root: Path, name: str) -> list[tuple[str, bool]]:
    """Write the scaffold under ``root``; ``(relative path, created?)`` for every file."""
    files = {
        "charter.toml": _MANIFEST.format(name=name),
        f"workflows/{name}.py": _WORKFLOW.format(name=name),
        ".personas/README.md": _FOLDER_README,
        ".personas/_shared/README.md": _SHARED_README,
        f".personas/{name}/AGENTS.md": _AGENTS.format(name=name),
        f".personas/{name}/persona.json": _PERSONA_JSON,
    }
    out: list[tuple[str, bool]] = []
    for rel, text in files.items():
        target = root / rel
        if target.exists():
            out.append((rel, False))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        # "x" mode: never overwrite, even if the file appeared since the check.
        with target.open("x", encoding="utf-8") as fh:
            fh.write(text)
        out.append((rel, True))
    return out


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option(
    "--persona", "name", default="assistant", show_default=True, help="Name of the example persona."
)
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def init(directory: str, name: str, as_json: bool) -> None:
    """Scaffold charter.toml, .personas/ (README, _shared/, one example) and its workflow.

    Safe to re-run: existing files are kept, never overwritten.
    """
    from charter.manifest.syntax import check_name

    if err := check_name(name):
        fail_input(f"--persona: {err}")
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
        results = scaffold(root, name)
    except OSError as exc:
        click.echo(f"error: cannot scaffold in {directory}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_FAILED)
    if as_json:
        emit_json(
            {
                "ok": True,
                "directory": str(root),
                "created": [rel for rel, made in results if made],
                "kept": [rel for rel, made in results if not made],
            }
        )
        return
    for rel, made in results:
        click.echo(f"{'created' if made else 'kept   '} {root / rel}")
    click.echo("next: charter persona check " + (directory if directory != "." else ""))
