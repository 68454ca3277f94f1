"""``prompts`` / ``prompt_overrides``: the loop's own prompts replaced by logical id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider, agent_loop

from .conftest import Recorder, tc


def test_each_id_replaces_its_prompt(rec: Recorder, tmp_path: Path) -> None:
    asset = tmp_path / "contract.md"
    asset.write_text("CONTRACT FROM FILE")
    seen: list[dict[str, Any]] = []

    def nudge(context: dict[str, Any]) -> str:
        seen.append(context)
        return "NUDGED: " + context["fmt"]

    provider = MockProvider(["thinking", "still thinking", "##DONE##"])
    agent_loop(
        "x",
        provider=provider,
        tools=[rec.tool("look")],
        tool_format="text",
        loop_until_done=True,
        prompts={
            "agent.loop_contract": str(asset),
            "agent.tool_contract_text": {"text": "TOOLS CONTRACT"},
            "agent.nudge": nudge,
        },
    )
    system = provider.requests[0].system or ""
    assert "CONTRACT FROM FILE" in system and "TOOLS CONTRACT" in system
    assert "IMPORTANT: You MUST keep working" not in system  # the default was replaced
    assert provider.requests[1].messages[-1]["content"] == "NUDGED: text"
    assert "Continue" in seen[0]["default"]  # the callable saw the built-in text


def test_the_judge_system_prompt_is_overridable() -> None:
    provider = MockProvider([tc("look"), "done"], judge_turns=['{"verdict": "done"}'])
    agent_loop(
        "x",
        provider=provider,
        tools=[],
        done_judge=True,
        loop_until_done=True,
        prompt_overrides={"agent.completion_judge_system": {"text": "JUDGE HARD"}},
    )
    judges = [r for r in provider.requests if r.purpose == "judge"]
    assert judges and judges[0].system == "JUDGE HARD"


def test_unknown_ids_and_bad_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AgentOptionError, match=r"did you mean 'agent\.loop_contract'"):
        agent_loop("x", provider=MockProvider(["ok"]), prompts={"agent.loop_contrct": "x"})
    with pytest.raises(AgentOptionError, match="cannot read"):
        agent_loop(
            "x",
            provider=MockProvider(["ok"]),
            prompts={"agent.nudge": str(tmp_path / "missing.md")},
        )
    with pytest.raises(AgentOptionError, match="not both"):
        agent_loop("x", provider=MockProvider(["ok"]), prompts={}, prompt_overrides={})
