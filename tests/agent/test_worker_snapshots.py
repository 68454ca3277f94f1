"""suspend_agent / resume_agent: a snapshot carries the worker's whole policy across processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider
from charter.agent.snapshots import load_snapshot, resume_agent, suspend_agent
from charter.agent.workers import WorkerPool, spawn_agent, wait_agent
from charter.policy import with_execution_policy

from .conftest import Recorder, tc


def test_suspend_then_resume_in_another_process(tmp_path: Path, rec: Recorder) -> None:
    snap_path = tmp_path / "w.json"

    async def park() -> dict[str, Any]:
        pool = WorkerPool()
        with with_execution_policy({"tools": {"deny": ["write_file"]}}, label="spawner"):
            handle = await spawn_agent(
                {
                    "task": "look at the repo",
                    "name": "scout",
                    "tools": [rec.tool("read_file")],
                    "provider": MockProvider([tc("read_file"), "found three files"]),
                    "token_budget": 500,
                },
                pool=pool,
            )
        await wait_agent(handle, pool=pool)
        return await suspend_agent(handle, "waiting for review", path=snap_path, pool=pool)

    parked = asyncio.run(park())
    assert parked["status"] == "suspended" and parked["initiator"] == "parent"
    assert parked["iterations_completed"] == 2 and parked["handle"]["status"] == "suspended"
    snap = load_snapshot(snap_path)
    assert snap["policy"]["tools"]["deny"] == ["write_file"] and snap["token_budget"] == 500

    # another process: no spawner frames there, only the snapshot's
    script = textwrap.dedent(
        f"""
        import asyncio, json
        from charter.agent import MockProvider, make_tool
        from charter.agent.snapshots import resume_agent
        from charter.agent.workers import WorkerPool, wait_agent
        ran = []
        def write_file(): ran.append("write_file"); return "written"
        def read_file(): ran.append("read_file"); return "text"
        async def main():
            pool = WorkerPool()
            tools = [make_tool(write_file, side_effect_level="workspace_write"),
                     make_tool(read_file, side_effect_level="read_only")]
            provider = MockProvider([
                {{"tool_calls": [{{"name": "write_file", "arguments": {{}}}}]}},
                {{"tool_calls": [{{"name": "read_file", "arguments": {{}}}}]}},
                "resumed and done"])
            h = await resume_agent({str(snap_path)!r}, "now write the report",
                                   tools=tools, provider=provider, pool=pool)
            env = await wait_agent(h, pool=pool)
            print(json.dumps({{"ran": ran, "env": env,
                              "first": [m["content"] for m in provider.requests[0].messages]}},
                             default=str))
        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["ran"] == ["read_file"]  # the denied write never ran in the new process
    assert data["env"]["error"]["tool"] == "write_file"
    assert data["env"]["worker"]["token_budget"] == 500
    first = data["first"]
    assert first[0] == "look at the repo" and "found three files" in first  # transcript carried
    assert "Resumed after suspension (parent): waiting for review" in first[-1]
    assert first[-1].endswith("now write the report")


def test_resume_without_transcript_uses_the_summary(tmp_path: Path) -> None:
    async def main() -> MockProvider:
        pool = WorkerPool()
        h = await spawn_agent({"task": "t1", "provider": MockProvider(["summary one"])}, pool=pool)
        await wait_agent(h, pool=pool)
        parked = await suspend_agent(h, path=tmp_path / "s.json", initiator="operator", pool=pool)
        provider = MockProvider(["ok"])
        h2 = await resume_agent(parked, "t2", False, provider=provider, pool=pool)
        await wait_agent(h2, pool=pool)
        return provider

    provider = asyncio.run(main())
    contents = [m["content"] for m in provider.requests[0].messages]
    assert contents[0] == "Summary of your earlier work: summary one"
    assert len(contents) == 2


def test_bad_snapshots_name_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "id": "w", "task": "x", "policy": [], "messages": []}))
    with pytest.raises(AgentOptionError, match=r"bad.json: policy: expected a dict"):
        load_snapshot(bad)
    (tmp_path / "nojson.json").write_text("{")
    with pytest.raises(AgentOptionError, match="not JSON"):
        load_snapshot(tmp_path / "nojson.json")
    with pytest.raises(AgentOptionError, match="initiator"):
        asyncio.run(suspend_agent("w", initiator="someone"))
