"""agent_await_resumption: a root loop parks itself, resumable with its whole policy."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop
from charter.agent.snapshots import load_snapshot, resume_agent
from charter.agent.suspension import agent_await_resumption, parse_resume_conditions
from charter.agent.workers import WorkerPool, wait_agent

from .conftest import Recorder, tc


def test_a_loop_parks_itself_and_resumes_under_the_same_policy(
    rec: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    provider = MockProvider(
        [
            tc("look"),
            tc(
                "agent_await_resumption",
                reason="waiting for the PR to merge",
                conditions={"trigger": "github.pr_merged", "timeout": 3600},
            ),
            tc("deploy"),
        ]
    )
    result = agent_loop(
        "ship it after merge",
        provider=provider,
        tools=[rec.tool("look"), rec.tool("deploy", level="network")],
        policy={"tools": {"deny": ["deploy"]}},
    )
    assert result.status == "suspended" and rec.names() == ["look"]
    d = result.to_dict()
    assert d["initiator"] == "self" and d["reason"] == "waiting for the PR to merge"
    assert d["conditions"] == {
        "trigger": {"provider": "github", "event": "pr_merged"},
        "timeout": 3600.0,
        "on_event": None,
    }
    assert d["iterations_completed"] == 2
    path = Path(d["handle"]["snapshot_path"])
    assert path.parent == tmp_path / ".charter" / "workers"
    snap = load_snapshot(path)
    assert "deploy" in snap["policy"]["tools"]["deny"]  # the stack travels as one frame
    # the parking call was structural: its assistant turn is answered, nothing dispatched
    last = result.transcript["messages"][-1]
    assert last["role"] == "tool" and "Suspended: waiting for the PR" in last["content"]
    assert snap["messages"][-1] == last  # the snapshot's history answers the call too

    async def resume() -> dict[str, Any]:
        pool = WorkerPool()
        again = MockProvider([tc("deploy"), "merged and checked"])
        handle = await resume_agent(
            str(path),
            "the PR merged",
            tools=[rec.tool("deploy", level="network")],
            provider=again,
            pool=pool,
        )
        env = await wait_agent(handle, pool=pool)
        env["first"] = [str(m.get("content")) for m in again.requests[0].messages]
        return env

    env = asyncio.run(resume())
    assert "deploy" not in rec.names()  # still denied after resuming
    assert env["first"][0] == "ship it after merge"
    assert "Resumed after suspension (self): waiting for the PR to merge" in env["first"][-1]


def test_invalid_conditions_go_back_to_the_model(rec: Recorder) -> None:
    provider = MockProvider(
        [tc("agent_await_resumption", reason="wait", conditions={"timeout": -5}), "ok, not parking"]
    )
    result = agent_loop("x", provider=provider, tools=[rec.tool("look")])
    assert result.status == "done"
    observation = str(provider.requests[1].messages[-1]["content"])
    assert "resume_conditions.timeout" in observation


def test_parse_resume_conditions_names_the_field() -> None:
    assert parse_resume_conditions(None) is None
    ok = parse_resume_conditions(
        {
            "on_event": "pr_opened",
            "trigger": {
                "provider": "linear",
                "event": "issue_updated",
                "metadata": {"team": "core"},
            },
        }
    )
    assert ok is not None and ok["on_event"] == ["pr_opened"]
    assert ok["trigger"]["metadata"] == {"team": "core"}
    for bad, field in (
        ({"trigger": "GitHub.PR"}, "trigger"),
        ({"timeout": 0}, "timeout"),
        ({"on_event": ["ok", "Not Ok"]}, r"on_event\[1\]"),
        ({"when": 1}, "when"),
    ):
        with pytest.raises(AgentOptionError, match=f"resume_conditions.{field}"):
            parse_resume_conditions(bad)
    with pytest.raises(AgentOptionError, match="reason"):
        agent_await_resumption("")
    assert agent_await_resumption("later")["action"] == "await_resumption"
    assert json.dumps(agent_await_resumption("later", {"timeout": 5}))
