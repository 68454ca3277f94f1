"""A daemon woken by a persona trigger from the runtime (issue 13 §4)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from charter.agent import MockProvider, daemon_snapshot, daemon_spawn, daemon_stop
from charter.agent.daemon import pending_events

MANIFEST = """
[[personas]]
name = "watcher"
description = "Hands every deploy to its long-running daemon."
entry_workflow = "workflows/watch.py:run"
tools = ["read"]
autonomy_tier = "act_auto"
receipt_policy = "optional"
triggers = ["deploys.finished"]
"""

WORKFLOW = """
def run(ctx):
    if ctx is None:
        return {"status": "ok"}
    event_id = ctx.daemon_trigger("reviewer")
    return {"queued": event_id, "status": "ok"}
"""


def _texts(provider: MockProvider) -> list[str]:
    return [str(m.get("content")) for r in provider.requests for m in r.messages]


def _wait(predicate: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_a_persona_trigger_wakes_its_daemon(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "workflows").mkdir(parents=True)
    (root / "charter.toml").write_text(MANIFEST)
    (root / "workflows" / "watch.py").write_text(WORKFLOW)
    state = tmp_path / "state"
    path = state / "daemons" / "watcher" / "reviewer"
    provider = MockProvider(default="reviewed the deploy")
    handle = daemon_spawn(
        {"name": "reviewer", "task": "Review each deploy.", "provider": provider,
         "persist_path": str(path)}
    )  # fmt: skip
    _wait(lambda: daemon_snapshot(handle)["state"] == "idle")
    out = subprocess.run(
        [sys.executable, "-m", "charter", "persona", "run", "watcher", "--provider", "deploys",
         "--kind", "finished", "--metadata", "service=api", "--manifest", str(root),
         "--state-dir", str(state), "--no-input"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    _wait(lambda: any('"service": "api"' in t for t in _texts(provider)))
    _wait(lambda: pending_events(path) == [])
    result = daemon_stop(handle)
    assert result.status == "idle" and result.llm.iterations == 2
