"""``a2a://`` handoffs are sent with the official A2A SDK to a local A2A agent built with
the same SDK; the remote task id and status come back as receipts (issue 16 §2)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from charter.run import RunOptions, run_persona

from .a2aserver import a2a_agent
from .conftest import events, persona_toml

pytest.importorskip("a2a")

PLAN = {
    "handoffs": [{"kind": "merge_receipt", "payload": {"pr": 7, "outcome": "merged"}, "facts": {}}]
}


def _pack(make_pack: Callable[..., Path], target: str) -> Path:
    routes = f"""
[[handoff_routes]]
id = "to-remote"
kind = "merge_receipt"
from = "actor"
route = [{{ target = "{target}", when = "always" }}]
"""
    return make_pack(persona_toml(handoffs=json.dumps([target])), routes=routes)


def _run(pack: Path, env: dict[str, str]) -> dict[str, object]:
    options = RunOptions(manifest=pack, state_dir=pack / "state", env=env)
    return run_persona(
        "actor", provider="test", kind="go", metadata={"id": "1"}, payload=PLAN, options=options
    ).to_dict()


def test_a2a_handoff_reaches_the_remote_agent_and_its_task_is_a_receipt(
    make_pack: Callable[..., Path],
) -> None:
    target = "a2a://reviewer.example.test/tasks"
    pack = _pack(make_pack, target)
    with a2a_agent() as agent:
        env = {**os.environ, "CHARTER_A2A_AGENTS": json.dumps({target: agent.url})}
        data = _run(pack, env)
        assert data["status"] == "completed"
        (message,) = agent.received  # the remote agent really got it
    (handoff,) = data["handoffs"]
    assert handoff["status"] == "dispatched" and handoff["target"] == target
    assert message.message_id == handoff["handoff_id"]
    assert message.metadata["kind"] == "merge_receipt"
    sent = dict(message.parts[1].data.struct_value.fields)
    assert sent["pr"].number_value == 7 and sent["outcome"].string_value == "merged"
    delivered = handoff["delivery"]
    assert delivered["status"] == "delivered"
    assert delivered["remote_task_id"] == agent.tasks[0]
    assert delivered["remote_status"] == "TASK_STATE_COMPLETED"
    (receipt,) = [e for e in events(pack) if e["kind"] == "persona.handoff.delivered"]
    assert receipt["payload"]["remote_task_id"] == agent.tasks[0]
    assert receipt["payload"]["handoff_id"] == handoff["handoff_id"]


def test_an_unreachable_agent_is_a_failed_handoff_not_a_silent_one(
    make_pack: Callable[..., Path],
) -> None:
    target = "a2a://gone.example.test/tasks"
    pack = _pack(make_pack, target)
    env = {**os.environ, "CHARTER_A2A_AGENTS": json.dumps({target: "http://127.0.0.1:9"})}
    data = _run(pack, env)
    (handoff,) = data["handoffs"]
    assert handoff["delivery"]["status"] == "failed" and handoff["delivery"]["error"]
    (failed,) = [e for e in events(pack) if e["kind"] == "persona.handoff.failed"]
    assert failed["payload"]["target"] == target
    assert any("a2a handoff" in w for w in data["warnings"])
