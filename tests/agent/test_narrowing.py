"""tool_surface_narrowing (hides, never enforces) and the progress tool."""

from __future__ import annotations

from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop, make_tool
from charter.agent.suspension import TOOL as LIFECYCLE

from .conftest import Recorder, tc


def _names(request: Any) -> list[str]:
    return [t["name"] for t in request.tools if t["name"] != LIFECYCLE]


def _events(result: Any, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.trace["events"] if e["type"] == kind]


def test_safe_mode_prunes_unused_read_only_tools(rec: Recorder) -> None:
    mystery = make_tool(lambda: "?", name="mystery")  # unannotated: class unknown, kept
    tools = [rec.tool("look"), rec.tool("peek"), rec.tool("deploy", level="network"), mystery]
    script = [tc("look") for _ in range(4)] + [tc("peek"), "done"]
    provider = MockProvider(script)
    result = agent_loop(
        "x",
        provider=provider,
        tools=tools,
        tool_surface_narrowing={"window_turns": 3},
        loop_until_done=True,
    )
    assert set(_names(provider.requests[2])) == {"look", "peek", "deploy", "mystery"}
    # from iteration 4 on, peek (read_only, unused for 3 turns) is hidden; the rest stays
    assert set(_names(provider.requests[3])) == {"look", "deploy", "mystery"}
    narrow = _events(result, "skill_narrow")[0]
    assert narrow["removed_tools"] == ["peek"] and narrow["iteration"] == 4
    assert {d["name"]: d["class"] for d in narrow["kept_details"] if d["name"] != LIFECYCLE} == {
        "look": "read_only",
        "deploy": "mutating",
        "mystery": "unknown",
    }
    # hiding is not enforcing: a call to the hidden tool is still decided, and allowed, here
    assert rec.names()[-1] == "peek"


def test_aggressive_and_hard_keep(rec: Recorder) -> None:
    tools = [rec.tool("look"), rec.tool("deploy", level="network"), rec.tool("keepme")]
    provider = MockProvider([tc("look"), tc("look"), tc("look"), "done"])
    agent_loop(
        "x",
        provider=provider,
        tools=tools,
        tool_surface_narrowing={"window_turns": 2, "mode": "aggressive", "hard_keep": ["keepme"]},
        loop_until_done=True,
    )
    assert set(_names(provider.requests[2])) == {"look", "keepme"}


def test_narrowing_can_be_disabled(rec: Recorder) -> None:
    provider = MockProvider([tc("look")] * 7 + ["done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look"), rec.tool("peek")],
        tool_surface_narrowing=False,
        loop_until_done=True,
    )
    assert "peek" in _names(provider.requests[-1]) and not _events(result, "skill_narrow")
    # on by default (seed: window 5, safe)
    provider = MockProvider([tc("look")] * 7 + ["done"])
    agent_loop(
        "x", provider=provider, tools=[rec.tool("look"), rec.tool("peek")], loop_until_done=True
    )
    assert "peek" not in _names(provider.requests[-1])


def test_progress_tool_reports_events() -> None:
    provider = MockProvider(
        [
            tc(
                "agent_progress",
                message="read the code",
                tasks=[{"title": "read", "status": "completed"}],
            ),
            "done",
        ]
    )
    result = agent_loop("x", "Be brief.", provider=provider, progress_tool=True)
    reported = _events(result, "progress_reported")
    assert reported == [
        {
            "type": "progress_reported",
            "iteration": 1,
            "message": "read the code",
            "tasks": [{"title": "read", "status": "completed"}],
        }
    ]
    assert "agent_progress tool" in str(provider.requests[0].system)
    assert result.to_dict()["progress_reports"][0]["message"] == "read the code"
    # a custom name, no nudge; the progress tool is never narrowed away
    provider = MockProvider([tc("report", message="m"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        progress_tool={"name": "report", "system_prompt_nudge": False},
    )
    assert provider.requests[0].system is None
    assert _events(result, "progress_reported")[0]["message"] == "m"


def test_progress_tool_is_still_decided_by_the_stack() -> None:
    provider = MockProvider([tc("agent_progress", message="m"), "done"])
    result = agent_loop(
        "x", provider=provider, progress_tool=True, policy={"tools": {"deny": ["agent_progress"]}}
    )
    assert not _events(result, "progress_reported")
    assert result.tools.rejected == ["agent_progress"]


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"tool_surface_narrowing": {"window": 3}}, "tool_surface_narrowing.window"),
        ({"tool_surface_narrowing": {"mode": "wild"}}, "tool_surface_narrowing.mode"),
        (
            {"tool_surface_narrowing": {"prune_classes": ["x"]}},
            "tool_surface_narrowing.prune_classes",
        ),
        ({"tool_surface_narrowing": "yes"}, "tool_surface_narrowing"),
        ({"progress_tool": {"nam": "x"}}, "progress_tool.nam"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, Any], where: str) -> None:
    with pytest.raises(AgentOptionError) as err:
        agent_loop("x", provider=MockProvider(["ok"]), **options)
    assert err.value.option == where
