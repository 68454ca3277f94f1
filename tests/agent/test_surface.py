"""The model's tool list is filtered with the visibility decision launch uses (name, MCP
server, side-effect level); hiding is not enforcing: a hidden tool called anyway is
still denied at dispatch."""

from __future__ import annotations

from charter.agent import MockProvider, agent_loop
from charter.policy import with_execution_policy

from .conftest import Recorder, tc


def _offered(provider: MockProvider) -> set[str]:
    return {t["name"] for t in provider.requests[0].tools}


def test_a_tool_above_the_level_ceiling_is_not_offered(rec: Recorder) -> None:
    provider = MockProvider(["done"])
    agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("read", level="read_only"), rec.tool("deploy", level="network")],
        policy={"side_effect_level": "read_only"},
    )
    offered = _offered(provider)
    assert "read" in offered and "deploy" not in offered


def test_a_hidden_tool_called_anyway_is_denied_at_dispatch(rec: Recorder) -> None:
    provider = MockProvider([tc("deploy"), "done"])
    result = agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("deploy", level="network")],
        policy={"side_effect_level": "read_only"},
    )
    assert rec.names() == []  # the handler never ran
    assert result.tools.rejected == ["deploy"]


def test_a_frame_pushed_by_the_host_narrows_the_offer_too(rec: Recorder) -> None:
    provider = MockProvider(["done"])
    with with_execution_policy({"side_effect_level": "none"}, label="host"):
        agent_loop("x", provider=provider, tools=[rec.tool("read", level="read_only")])
    assert "read" not in _offered(provider)
    twin = MockProvider(["done"])
    agent_loop("x", provider=twin, tools=[rec.tool("read", level="read_only")])
    assert "read" in _offered(twin)
