"""Two tools with one name are refused, naming both (never one silently replacing the
other)."""

from __future__ import annotations

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop, make_tool

from .conftest import Recorder, tc


def test_two_tools_with_one_name_raise_naming_both(rec: Recorder) -> None:
    def look_here() -> str:
        return "here"

    def look_there() -> str:
        return "there"

    first = make_tool(look_here, name="look", side_effect_level="read_only")
    second = make_tool(look_there, name="Look", side_effect_level="read_only")
    provider = MockProvider([tc("look"), "done"])
    with pytest.raises(AgentOptionError, match="two tools are named") as caught:
        agent_loop("x", provider=provider, tools=[first, second])
    message = str(caught.value)
    assert "tools[0]" in message and "look_here" in message
    assert "tools[1]" in message and "look_there" in message
    assert provider.requests == []  # refused before any model call


def test_a_tool_clashing_with_a_loop_tool_names_the_option(rec: Recorder) -> None:
    mine = rec.tool("delegate")
    with pytest.raises(AgentOptionError, match="tools\\[0\\]") as caught:
        agent_loop(
            "x",
            provider=MockProvider(["done"]),
            tools=[mine],
            members={"helper": lambda task: "ok"},
        )
    assert "delegate" in str(caught.value) and "charter.agent.delegation" in str(caught.value)


def test_distinct_names_still_work(rec: Recorder) -> None:
    result = agent_loop(
        "x", provider=MockProvider([tc("a"), tc("b"), "done"]), tools=[rec.tool("a"), rec.tool("b")]
    )
    assert result.status == "done" and rec.names() == ["a", "b"]
