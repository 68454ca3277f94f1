"""Entry workflow of the merge_captain persona (examples/personas/charter.toml).

Template code: the steps match the persona's declared stages, so the runtime can push
each stage's policy while the step runs. Side effects are dry-run unless the context
says otherwise.
"""

from __future__ import annotations

from typing import Any


def run(ctx: Any) -> dict[str, Any]:
    """Called by the charter runtime with the run context; returns the run's receipt body."""
    dry_run = bool(getattr(ctx, "dry_run", True))
    return {"persona": "merge_captain", "dry_run": dry_run, "status": "ok"}
