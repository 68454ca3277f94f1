"""`make demo` end to end: the real commands, mock provider, SQLite (CI runs this)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from charter.runtime import open_event_log

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "charter", "demo", "--state-dir", str(state)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "ok: 3 personas" in out
    assert "tier=shadow" in out and "dry run:" in out
    assert "granted merge_captain" in out and "executed:   call_1 github_merge -> ok" in out
    # shadow: the review's exact request is the dry-run receipt; nothing was posted
    assert "would send: POST /repos/example/charter/pulls/463/reviews" in out
    assert '"path": "docs/setup.md", "line": 2, "side": "RIGHT"' in out
    assert "reviews posted: 0 (review_captain runs in shadow); merges: 1" in out
    # the approved merge reached the fake GitHub pinned to the reviewed head
    sha = "a42b0ea937df821c296119c26916c7c31dfa3f0d"
    assert f'PUT /repos/example/charter/pulls/462/merge {{"sha": "{sha}"' in out
    assert "denied by rule 'git push:*'" in out
    assert "(frame 'handoff:handoff_" in out
    assert "queued review_captain" in out and "resume -> idle" in out
    assert "budget exhausted: max_tokens" in out
    assert "persona/update frames" in out

    log = open_event_log(state_dir=state)
    try:
        events = list(log.iter_all())
    finally:
        log.close()
    kinds = [e.kind for e in events]
    for kind in (
        "persona.tool.dry_run",
        "persona.approval.requested",
        "persona.approval.granted",
        "persona.tool.executed",
        "persona.tool.denied",
        "persona.handoff.dispatched",
        "persona.handoff.received",
        "persona.work.queued",
        "persona.drain.completed",
        "persona.budget.exhausted",
        "persona.run.recorded",
    ):
        assert kind in kinds, kind
    granted = next(e for e in events if e.kind == "persona.approval.granted")
    assert granted.payload["by"] == "maintainer"
