"""System reminders reach sub-agents as far as their propagate says."""

from __future__ import annotations

from typing import Any

import pytest

from charter.agent import (
    AgentOptionError,
    MockProvider,
    agent_loop,
    agent_system_reminder,
    make_tool,
    sub_agent_run_async,
)

from .conftest import tc


def _reminders(provider: MockProvider) -> list[str]:
    return [
        str(m["content"]).split("\n")[1]
        for m in provider.requests[0].messages
        if str(m.get("content", "")).startswith("<system_reminder>")
    ]


def test_propagation_all_session_none_through_two_generations() -> None:
    seen: dict[str, Any] = {}

    async def spawn_child() -> str:
        child_provider = MockProvider([tc("grandchild"), "child done"])

        async def grandchild() -> str:
            gp = MockProvider(["grandchild done"])
            await sub_agent_run_async("deepest", provider=gp)
            seen["grandchild"] = gp
            return "ok"

        tool = make_tool(grandchild, name="grandchild", annotations={"side_effect_level": "none"})
        result = await sub_agent_run_async("child task", provider=child_provider, tools=[tool])
        seen["child"] = child_provider
        seen["child_result"] = result
        return "spawned"

    parent_tool = make_tool(
        spawn_child, name="spawn_child", annotations={"side_effect_level": "none"}
    )
    parent = MockProvider([tc("spawn_child"), "parent done"])
    result = agent_loop(
        "parent task",
        provider=parent,
        tools=[parent_tool],
        session_id="parent-1",
        system_reminders=[
            {"text": "ALL: the repo is frozen", "propagate": "all"},
            {"text": "SESSION: use the staging cluster", "propagate": "session"},
            {"text": "NONE: internal note", "propagate": "none"},
        ],
    )
    assert _reminders(parent) == [
        "ALL: the repo is frozen",
        "SESSION: use the staging cluster",
        "NONE: internal note",
    ]
    assert _reminders(seen["child"]) == [
        "ALL: the repo is frozen",
        "SESSION: use the staging cluster",
    ]
    assert _reminders(seen["grandchild"]) == ["ALL: the repo is frozen"]
    events = [e for e in result.trace["events"] if e["type"] == "system_reminder"]
    assert {e["source"] for e in events} == {"own"}


def test_a_reminder_added_mid_run_reaches_the_next_turn_and_children() -> None:
    def note() -> str:
        agent_system_reminder("the deploy window closed", propagate="session")
        return "noted"

    provider = MockProvider([tc("note"), "done"])
    agent_loop(
        "x", provider=provider, tools=[make_tool(note, annotations={"side_effect_level": "none"})]
    )
    assert "the deploy window closed" in str(provider.requests[1].messages[-1]["content"])
    with pytest.raises(AgentOptionError, match="no agent_loop"):
        agent_system_reminder("outside")
    with pytest.raises(AgentOptionError, match="propagate"):
        agent_loop("x", system_reminders=[{"text": "t", "propagate": "everywhere"}])
