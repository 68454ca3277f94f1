"""Workers: spawn/wait/send_input/close/list, narrowed at spawn time, budgets reserved."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop, default_llm_caller
from charter.agent.subagents import _LEDGER, TokenLedger
from charter.agent.workers import (
    WorkerPool,
    agent_lifecycle_tools,
    close_agent,
    list_agents,
    send_input,
    spawn_agent,
    wait_agent,
)
from charter.policy import with_execution_policy

from .conftest import Recorder, tc


def _slow(delay: float) -> Any:
    async def caller(call: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(delay)
        return await default_llm_caller()(call)

    return caller


def test_workers_run_concurrently_and_report(rec: Recorder) -> None:
    pool = WorkerPool()

    async def main() -> list[dict[str, Any]]:
        handles = [
            await spawn_agent(
                {
                    "task": f"job {i}",
                    "name": f"w{i}",
                    "tools": [rec.tool("read")],
                    "provider": MockProvider([tc("read"), f"result {i}"]),
                    "options": {"llm_caller": _slow(0.05)},
                },
                pool=pool,
            )
            for i in range(3)
        ]
        assert [h["status"] for h in list_agents(pool=pool)] == ["running"] * 3
        return list(await wait_agent(handles, pool=pool))

    started = asyncio.get_event_loop_policy().new_event_loop()
    try:
        t0 = started.time()
        done = started.run_until_complete(main())
        elapsed = started.time() - t0
    finally:
        started.close()
    assert [d["summary"] for d in done] == ["result 0", "result 1", "result 2"]
    assert all(d["ok"] and d["worker"]["status"] == "done" for d in done)
    assert elapsed < 0.05 * 2 * 3  # two slow model calls each, overlapped
    assert rec.names() == ["read"] * 3


def test_worker_keeps_the_spawners_stack_after_it_is_popped(rec: Recorder) -> None:
    pool = WorkerPool()

    async def main() -> dict[str, Any]:
        with with_execution_policy({"tools": {"deny": ["write_file"]}}, label="spawner"):
            handle = await spawn_agent(
                {
                    "task": "write it",
                    "tools": [rec.tool("write_file", level="workspace_write"), rec.tool("read")],
                    "allowed_tools": ["write_file", "read"],
                    "provider": MockProvider([tc("write_file"), tc("read"), "done"]),
                    "options": {"llm_caller": _slow(0.01)},
                },
                pool=pool,
            )
        # the spawner's frame is gone before the worker's first call
        assert handle["policy"]["tools"]["deny"] == ["write_file"]
        return dict(await wait_agent(handle, pool=pool))

    env = asyncio.run(main())
    assert rec.names() == ["read"]  # hostile call refused, allowed twin ran
    assert env["error"] == {
        "category": "permission_denied",
        "message": env["error"]["message"],
        "tool": "write_file",
    }


def test_send_input_carries_or_resets_the_transcript() -> None:
    async def run(mode: str) -> MockProvider:
        pool = WorkerPool()
        provider = MockProvider(["first answer", "second answer"])
        handle = await spawn_agent(
            {"task": "one", "provider": provider, "carry": {"transcript_mode": mode}}, pool=pool
        )
        await wait_agent(handle, pool=pool)
        again = await send_input(handle, "two", pool=pool)
        assert again["status"] == "running" and again["cycle"] == 2
        env = await wait_agent(handle, pool=pool)
        assert env["summary"] == "second answer" and env["session_id"].endswith(".2")
        return provider

    inherit = asyncio.run(run("inherit"))
    assert [m["content"] for m in inherit.requests[1].messages] == [
        "one",
        "first answer",
        "two",
    ]
    reset = asyncio.run(run("reset"))
    assert [m["content"] for m in reset.requests[1].messages] == ["two"]


def test_close_agent_cancels_and_releases_the_reservation() -> None:
    pool = WorkerPool()

    async def main() -> tuple[dict[str, Any], TokenLedger]:
        ledger = TokenLedger(100)
        token = _LEDGER.set(ledger)
        try:
            first = await spawn_agent(
                {
                    "task": "slow",
                    "provider": MockProvider(["x"]),
                    "token_budget": 80,
                    "options": {"llm_caller": _slow(5)},
                },
                pool=pool,
            )
            second = await spawn_agent(
                {"task": "b", "provider": MockProvider(["y"]), "token_budget": 80}, pool=pool
            )
            # reserved at spawn: the second gets what the first left
            assert (first["token_budget"], second["token_budget"]) == (80, 20)
            await wait_agent(second, pool=pool)
            closed = await close_agent(first, pool=pool)
            return closed, ledger
        finally:
            _LEDGER.reset(token)

    closed, ledger = asyncio.run(main())
    assert closed["status"] == "cancelled"
    assert ledger.reserved == 0
    with pytest.raises(AgentOptionError, match="is cancelled"):
        asyncio.run(send_input(closed, "again", pool=pool))


def test_model_drives_workers_through_lifecycle_tools(rec: Recorder) -> None:
    child = MockProvider([tc("read"), "child result"])
    provider = MockProvider(
        [
            tc("spawn_agent", task="look around", name="scout", allowed_tools=["read"]),
            lambda req: tc("wait_agent", id=_spawned_id(req)),
            tc("list_agents"),
            "all done",
        ]
    )
    result = agent_loop(
        "x",
        provider=provider,
        tools=agent_lifecycle_tools([rec.tool("read"), rec.tool("deploy")], provider=child),
        policy={"tools": {"deny": ["deploy"]}},
    )
    assert result.status == "done", result.error
    waited = [m for m in result.transcript["messages"] if m.get("name") == "wait_agent"]
    assert '"summary": "child result"' in waited[0]["content"]
    listed = next(m for m in result.transcript["messages"] if m.get("name") == "list_agents")
    assert '"worker_status": "done"' in listed["content"]
    assert rec.names() == ["read"]


def _spawned_id(req: Any) -> str:
    import json

    for m in reversed(req.messages):
        if m.get("name") == "spawn_agent":
            return str(json.loads(m["content"])["id"])
    raise AssertionError("no spawn result")


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"task": "x", "graph": {}}, "spawn_agent.graph"),
        ({"task": "x", "carry": {"transcript_mode": "copy"}}, "spawn_agent.carry.transcript_mode"),
        ({"task": ""}, "task"),
        ({"task": "x", "options": {"max_iteratons": 2}}, "max_iteratons"),
    ],
)
def test_bad_worker_config_names_the_field(config: dict[str, Any], where: str) -> None:
    async def main() -> None:
        handle = await spawn_agent({"provider": MockProvider(["ok"]), **config}, pool=WorkerPool())
        env = await wait_agent(handle, pool=WorkerPool())  # pragma: no cover
        raise AssertionError(env)

    with pytest.raises(AgentOptionError) as err:
        asyncio.run(main())
    assert err.value.option == where


def test_background_sub_agent_and_fork_lineage() -> None:
    from charter.agent import sub_agent_run_async

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        handle = await sub_agent_run_async(
            "first", provider=MockProvider(["a", "b"]), background=True
        )
        assert handle["mode"] == "sub_agent" and handle["status"] == "running"
        first = await wait_agent(handle)
        worker = __import__("charter.agent.workers", fromlist=["_POOL"])._POOL.get(handle)
        worker.transcript_mode = "fork"
        await send_input(handle, "second")
        return first, await wait_agent(handle)

    first, second = asyncio.run(main())
    assert second["transcript"]["parent_transcript_id"] == first["transcript"]["id"]
    assert second["transcript"]["id"] != first["transcript"]["id"]
    with pytest.raises(AgentOptionError, match="background"):
        asyncio.run(sub_agent_run_async("x", provider=MockProvider(["a"]), background="yes"))


def test_graceful_stop_folds_child_handoffs() -> None:
    from charter.agent.workers import agent_stop

    pool = WorkerPool()

    async def main() -> tuple[dict[str, Any], WorkerPool]:
        lead_tools = agent_lifecycle_tools(
            [], pool=pool, provider=MockProvider(["never"]), llm_caller=_slow(5)
        )
        lead = await spawn_agent(
            {
                "task": "lead",
                "name": "lead",
                "tools": lead_tools,
                "provider": MockProvider([tc("spawn_agent", task="dig", name="digger"), "led"]),
            },
            pool=pool,
        )
        await wait_agent(lead, pool=pool)
        child = next(h for h in list_agents(pool=pool) if h["name"] == "digger")
        assert child["parent_id"] == lead["id"] and child["status"] == "running"
        return await agent_stop(lead, graceful=True, reason="takeover", pool=pool), pool

    out, pool = asyncio.run(main())
    assert out["status"] == "stopped" and out["handoff"]["summary"] == "led"
    assert [h["name"] for h in out["handoffs"]] == ["digger"]
    assert out["children"][0]["status"] == "stopped"
    assert [(e["type"], e["graceful"]) for e in pool.events] == [
        ("WorkerStopped", True),
        ("WorkerStopped", True),
    ]


def test_subagent_tools_pause_resume_stop(
    rec: Recorder, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    child = MockProvider(["first", "after resume"])
    provider = MockProvider(
        [
            tc("spawn_agent", task="job", name="w"),
            lambda req: tc("wait_agent", id=_spawned_id(req)),
            lambda req: tc("subagent_pause", id=_spawned_id(req), reason="hold"),
            lambda req: tc("subagent_resume", id=_spawned_id(req), input="go on"),
            lambda req: tc("wait_agent", id=_spawned_id(req)),
            lambda req: tc("subagent_stop", id=_spawned_id(req)),
            "done",
        ]
    )
    tools = agent_lifecycle_tools([], subagents=True, provider=child)
    assert {t.name for t in tools} >= {"subagent_pause", "subagent_resume", "subagent_stop"}
    result = agent_loop("x", provider=provider, tools=tools)
    assert result.status == "done" and not result.tools.rejected, result.tools.to_dict()
    outputs = {m["name"]: m["content"] for m in result.transcript["messages"] if m.get("name")}
    assert '"worker_status": "suspended"' in outputs["subagent_pause"]
    assert '"summary": "after resume"' in outputs["wait_agent"]
    assert '"worker_status": "stopped"' in outputs["subagent_stop"]
    assert list((tmp_path / ".charter" / "workers").glob("worker_*.json"))


def _git(repo: Any, *args: str) -> str:
    import subprocess

    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def test_worker_writes_in_its_own_worktree(tmp_path: Any) -> None:
    from charter.agent import builtin_tools

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("hi\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    pool = WorkerPool()
    escape = str(repo / "escaped.txt")

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        handle = await spawn_agent(
            {
                "task": "write notes",
                "tools": lambda ws: builtin_tools(ws, names=("write",)),
                "provider": MockProvider(
                    [
                        tc("write", path=escape, content="nope"),
                        tc("write", path="notes.txt", content="worker notes"),
                        "done",
                    ]
                ),
                "execution": {"worktree": {"repo": str(repo), "branch": "worker/notes"}},
            },
            pool=pool,
        )
        env = await wait_agent(handle, pool=pool)
        written = Path(handle["worktree"]["path"]) / "notes.txt"
        assert written.read_text() == "worker notes"  # the effect, in the worker's tree
        closed = await close_agent(handle, pool=pool)
        return handle, env, closed

    handle, env, closed = asyncio.run(main())
    tree = Path(handle["worktree"]["path"])
    assert env["tools"]["successful"] == ["write"]
    assert env["error"]["category"] == "permission_denied"  # the write outside was refused
    assert not (repo / "escaped.txt").exists() and not (repo / "notes.txt").exists()
    assert not tree.exists()  # removed on close
    assert "worker/notes" in _git(repo, "branch", "--list", "worker/notes")  # branch kept
    assert str(tree) not in _git(repo, "worktree", "list")
    assert closed["worktree"]["cleanup"] == "remove"


def test_worktree_preserve_and_bad_repo(tmp_path: Any) -> None:
    with pytest.raises(AgentOptionError) as err:
        asyncio.run(
            spawn_agent(
                {"task": "x", "execution": {"worktree": {"repo": str(tmp_path), "branch": "b"}}},
                pool=WorkerPool(),
            )
        )
    assert err.value.option == "spawn_agent.execution.worktree.repo"
    with pytest.raises(AgentOptionError) as err:
        asyncio.run(
            spawn_agent(
                {"task": "x", "execution": {"worktree": {"branch": "b", "cleanup": "never"}}},
                pool=WorkerPool(),
            )
        )
    assert err.value.option == "spawn_agent.execution.worktree.cleanup"


def test_carry_compact_inherits_a_summary_not_the_history(rec: Recorder) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        pool = WorkerPool()
        first = MockProvider([tc("look"), "found the config in setup.cfg"] + ["again"] * 3)
        handle = await spawn_agent(
            {
                "task": "find the config",
                "provider": first,
                "tools": [rec.tool("look")],
                "carry": {"transcript_mode": "compact"},
            },
            pool=pool,
        )
        await wait_agent(handle, pool=pool)
        await send_input(handle, "now summarise it", pool=pool)
        await wait_agent(handle, pool=pool)
        second = first.requests[-1].messages
        return [m["role"] for m in second], [str(m.get("content")) for m in second]

    roles, contents = asyncio.run(scenario())
    assert roles == ["user", "user"]  # one summary message, then the new task
    assert "compacted transcript" in contents[0] and "setup.cfg" in contents[0]
    assert "look" in contents[0]  # the call is named in the summary, not replayed
    assert contents[1] == "now summarise it"
