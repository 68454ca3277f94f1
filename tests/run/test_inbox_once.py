"""Inbox items end exactly once (issue 31): a handoff that reaches a persona busy at its
``max_concurrency`` goes through the queue under ``charter serve``; once run it leaves
the inbox, and serve's ticks do not offer it again (before: a ``persona.run.duplicate``
about once a second, without end). The drained run is handed the item
(``ctx.handoff_item``: the workflow reads its plan from it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .conftest import charter_argv, events, executed, persona_toml, post_webhook

SECRET = "inbox-secret"
ROUTES = """
[[handoff_routes]]
id = "jobs"
kind = "job"
from = "actor"
route = [ { target = "other", when = "always" } ]
"""
MERGE = {"tool": "github", "args": {"action": "merge", "pr": 31}, "stage": "act"}


def _count(log: list[dict[str, Any]], kind: str, **match: Any) -> int:
    return sum(
        1
        for e in log
        if e["kind"] == kind and all(e["payload"].get(k) == v for k, v in match.items())
    )


def test_a_queued_handoff_runs_once_with_its_item_and_leaves_the_inbox(
    make_pack: Callable[..., Path],
) -> None:
    other = persona_toml("other").replace('triggers = ["test.go"]', 'triggers = ["test.busy"]')
    pack = make_pack(persona_toml(handoffs='["other"]'), other, routes=ROUTES)
    env = {**os.environ, "CHARTER_WEBHOOK_SECRET_TEST": SECRET}
    argv = charter_argv(
        "serve", "--port", "0", "--workers", "2", "--manifest", str(pack),
        "--state-dir", str(pack / "state"),
    )  # fmt: skip
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    busy = None
    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().split()[2]
        # other is busy (its one slot, held by a run in another process) when the
        # handoff arrives: serve's tick offers it and it waits in the queue
        holder = pack / "busy.json"
        holder.write_text(
            json.dumps(
                {
                    "provider": "test",
                    "kind": "busy",
                    "metadata": {"id": "b1"},
                    "payload": {"sleep": 4},
                }
            )
        )
        busy = subprocess.Popen(
            charter_argv("persona", "run", "other", "--payload", str(holder), "--manifest",
                         str(pack), "--state-dir", str(pack / "state")),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (pack / "started").exists():
            assert time.monotonic() < deadline, "other never started"
            time.sleep(0.02)
        plan = {"handoffs": [{"kind": "job", "payload": {"plan": {"calls": [MERGE]}}}]}
        assert post_webhook(base, SECRET, "h1", plan) == 202
        handoff_id = None
        while time.monotonic() < deadline:
            log = events(pack)
            done = [
                e for e in log
                if e["kind"] == "persona.run.completed"
                and str(e["payload"].get("work_key", "")).startswith("handoff:")
            ]  # fmt: skip
            if done:
                handoff_id = done[0]["payload"]["work_key"].removeprefix("handoff:")
                break
            time.sleep(0.05)
        assert handoff_id is not None, [e["kind"] for e in events(pack)]
        time.sleep(2.5)  # five of serve's ticks: none may offer the item again
        log = events(pack)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        if busy is not None:
            busy.wait(timeout=60)
    key = f"handoff:{handoff_id}"
    # it went through the queue (other was busy) ...
    assert _count(log, "persona.work.queued", work_key=key) == 1
    # ... ran once, handed its item (the plan inside it made the merge) ...
    assert _count(log, "persona.run.started", work_key=key, handoff_id=handoff_id) == 1
    assert _count(log, "persona.run.completed", work_key=key) == 1
    assert executed(pack) == [{"action": "merge", "pr": 31}]
    # ... and was never offered again
    assert _count(log, "persona.run.duplicate", work_key=key) == 0
    assert _count(log, "persona.work.coalesced", work_key=key) == 0
    from charter.run import RunOptions, open_session
    from charter.runtime.clock import utc_now

    session = open_session(RunOptions(manifest=pack, state_dir=pack / "state"))
    try:
        status = session.runtime.status("other", now=utc_now()).to_dict()
    finally:
        session.close()
    assert status["inbox"]["count"] == 0 and status["queue"]["count"] == 0
