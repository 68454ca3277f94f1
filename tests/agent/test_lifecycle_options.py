"""``subagents`` / ``subagent_tools`` (parent-side worker control) and
``prefetch_next_turn`` (audit sinks flushed in the background, drained at the end)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from charter.agent import AgentOptionError, AuditSinkHook, MockProvider, agent_loop

from .conftest import Recorder, tc


def test_subagents_let_the_model_spawn_pause_and_resume_with_input(
    rec: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ids: list[str] = []

    def script(request: Any) -> Any:
        turn = len([m for m in request.messages if m["role"] == "assistant"])
        last = str(request.messages[-1].get("content"))
        if "RESUMED WITH" in last or "Resumed after suspension" in last:
            return "worker saw: " + last[-20:]
        if '"id": "worker_' in last and not ids:
            ids.append(last.split('"id": "')[1].split('"')[0])
        plan = [
            tc("spawn_agent", task="look around"),
            tc("wait_agent", id=ids[0] if ids else ""),
            tc("subagent_pause", id=ids[0] if ids else "", reason="hold"),
            tc("subagent_resume", id=ids[0] if ids else "", input="RESUMED WITH new input"),
            tc("wait_agent", id=ids[0] if ids else ""),
            "parent done",
        ]
        return plan[min(turn, len(plan) - 1)]

    provider = MockProvider([script] * 20)
    result = agent_loop("coordinate", provider=provider, tools=[rec.tool("look")], subagents=True)
    assert result.status == "done", result.to_dict()["tools"]
    assert {"spawn_agent", "subagent_pause", "subagent_resume"} <= set(result.tools.successful)
    seen = " ".join(str(m.get("content")) for m in result.transcript["messages"])
    assert "RESUMED WITH new input" in seen and "worker saw" in seen


def test_subagents_must_be_a_bool() -> None:
    with pytest.raises(AgentOptionError, match="subagent_tools"):
        agent_loop("x", provider=MockProvider(["ok"]), subagent_tools="yes")


def test_prefetch_flushes_in_the_background_and_drains_before_returning(rec: Recorder) -> None:
    written: list[tuple[str, float]] = []
    requests: list[float] = []

    def slow_sink(record: dict[str, Any]) -> None:
        time.sleep(0.05)
        written.append((record["tool"], time.perf_counter()))

    class Timed(MockProvider):
        async def complete(self, request: Any) -> Any:
            requests.append(time.perf_counter())
            return await super().complete(request)

    result = agent_loop(
        "x",
        provider=Timed([tc("look"), tc("look"), "done"]),
        tools=[rec.tool("look")],
        hooks=[AuditSinkHook(slow_sink)],
        prefetch_next_turn=True,
    )
    assert result.status == "done"
    assert [w[0] for w in written] == ["look", "look"]  # all drained, in order
    assert requests[1] < written[0][1]  # the next turn started before the first flush ended


def test_prefetch_without_a_sink_is_an_error() -> None:
    with pytest.raises(AgentOptionError, match="prefetch_next_turn"):
        agent_loop("x", provider=MockProvider(["ok"]), prefetch_next_turn=True)
