"""Parked and resumed loops against fake servers that enforce the providers' message
rules: every tool call in a request has its result (OpenAI), every ``tool_use`` its
``tool_result`` in the next message (Anthropic)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from charter.agent import MockProvider, agent_loop
from charter.agent.snapshots import load_snapshot, resume_agent, suspend_agent
from charter.agent.workers import WorkerPool, spawn_agent, wait_agent

from .conftest import Recorder, tc
from .fakeserver import fake_server
from .message_rules import check_chat, check_messages
from .replies import ROUTES, provider_for, reply

pytest.importorskip("openai")
pytest.importorskip("anthropic")

PARK = ("call_park", "agent_await_resumption", {"reason": "waiting for CI"})


def test_the_fake_servers_refuse_a_tool_call_without_its_result() -> None:
    # the rules themselves, so a fake that stopped enforcing them fails here
    dangling = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "user", "content": "next"},
    ]
    refusal = check_chat({"messages": dangling})
    assert refusal is not None and "c1" in refusal["error"]["message"]
    assert check_chat({"messages": [*dangling[:2], {"role": "tool", "tool_call_id": "c1"}]}) is None
    orphan = [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c9"}]
    assert check_chat({"messages": orphan}) is not None
    anth = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
        {"role": "user", "content": [{"type": "text", "text": "next"}]},
    ]
    refusal = check_messages({"messages": anth})
    assert refusal is not None and "t1" in refusal["error"]["message"]


@pytest.mark.parametrize("route", ROUTES)
def test_a_parked_loop_resumes_against_the_real_message_rules(
    route: str, rec: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with fake_server([reply(route, "parking", [PARK])]) as srv:
        parked = agent_loop("ship it", provider=provider_for(route, srv.url), model="m")
    assert parked.status == "suspended", parked.error
    path = parked.to_dict()["handle"]["snapshot_path"]

    async def resume(url: str) -> dict[str, Any]:
        pool = WorkerPool()
        handle = await resume_agent(
            path, "CI is green", provider=provider_for(route, url), model="m", pool=pool
        )
        return dict(await wait_agent(handle, pool=pool))

    with fake_server([reply(route, "shipped")]) as srv2:
        env = asyncio.run(resume(srv2.url))
    assert srv2.rejected == []  # no 400: the parking call went back with its result
    assert env["status"] == "done" and env["summary"] == "shipped"
    sent = str(srv2.requests[0]["json"])
    assert "CI is green" in sent and "Suspended: waiting for CI" in sent


def test_a_worker_parked_by_its_parent_sees_the_resume_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    async def scenario() -> list[str]:
        pool = WorkerPool()
        handle = await spawn_agent(
            {"task": "do A", "provider": MockProvider(["A done"])}, pool=pool
        )
        await wait_agent(handle, pool=pool)
        await suspend_agent(handle, "hold on", pool=pool)
        again = MockProvider(["B done"])
        resumed = await resume_agent(handle, "now do B", provider=again, pool=pool)
        env = await wait_agent(resumed, pool=pool)
        assert env["status"] == "done" and env["summary"] == "B done"
        return [str(m.get("content")) for m in again.requests[0].messages]

    seen = asyncio.run(scenario())
    assert seen[0] == "do A" and "now do B" in seen[-1]


def test_a_worker_that_parked_itself_is_resumed_with_its_input(
    rec: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        pool = WorkerPool()
        first = MockProvider([tc("agent_await_resumption", reason="wait for review")])
        handle = await spawn_agent(
            {"task": "do A", "provider": first, "policy": {"tools": {"deny": ["deploy"]}}},
            pool=pool,
        )
        parked = await wait_agent(handle, pool=pool)
        again = MockProvider([tc("deploy"), "reviewed"])
        resumed = await resume_agent(
            handle, "review approved", tools=[rec.tool("deploy")], provider=again, pool=pool
        )
        env = await wait_agent(resumed, pool=pool)
        return parked, env, [str(m.get("content")) for m in again.requests[0].messages]

    parked, env, seen = asyncio.run(scenario())
    assert parked["status"] == "suspended" and parked["reason"] == "wait for review"
    snap = load_snapshot(parked["handle"]["snapshot_path"])
    assert snap["id"] == parked["worker"]["id"]  # under the worker's own id
    assert snap["messages"][-1]["role"] == "tool"  # the parking call is answered
    assert env["status"] != "suspended" and "review approved" in seen[-1]
    assert rec.names() == []  # the worker's policy came back with it: deploy still denied


def test_resume_when_is_validated_and_kept_with_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    from charter.agent import AgentOptionError

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        pool = WorkerPool()
        handle = await spawn_agent(
            {
                "task": "watch CI",
                "provider": MockProvider(["watching"]),
                "options": {"resume_when": {"trigger": "github.check_run", "timeout": 600}},
            },
            pool=pool,
        )
        await wait_agent(handle, pool=pool)
        out = await suspend_agent(handle, "until CI reports", pool=pool)
        return handle, out

    handle, out = asyncio.run(scenario())
    expected = {
        "trigger": {"provider": "github", "event": "check_run"},
        "timeout": 600.0,
        "on_event": None,
    }
    assert handle["resume_when"] == expected and out["conditions"] == expected
    assert load_snapshot(out["snapshot_path"])["conditions"] == expected

    async def bad() -> None:
        await spawn_agent(
            {
                "task": "t",
                "provider": MockProvider(["x"]),
                "options": {"resume_when": {"timeout": 0}},
            },
            pool=WorkerPool(),
        )

    with pytest.raises(AgentOptionError, match=r"spawn_agent\.options\.resume_when\.timeout"):
        asyncio.run(bad())
