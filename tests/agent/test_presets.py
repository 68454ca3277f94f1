"""Role presets: the seed's defaults, caller overrides, and the captain defaults enforced."""

from __future__ import annotations

from typing import Any

import pytest

from charter.agent import AgentOptionError, MockProvider
from charter.agent.presets import (
    PRESETS,
    agent_budget,
    agent_preset,
    audit_agent,
    merge_captain_agent,
    oncall_captain_agent,
    summary_agent,
    verify_agent,
)

from .conftest import Recorder, tc


def test_seed_defaults_table() -> None:
    table = {
        "audit": ("verifier", True, 1, (4, 12, 2)),
        "repair": ("tool_using", True, 2, (4, 16, 2)),
        "verify": ("verifier", False, 0, (1, 5, 1)),
        "merge_captain": ("tool_using", True, 3, (8, 60, 4)),
        "review_captain": ("tool_using", True, 3, (6, 30, 3)),
        "oncall_captain": ("tool_using", True, 3, (6, 24, 3)),
        "release_captain": ("tool_using", True, 3, (8, 40, 4)),
    }
    for kind, (profile, until_done, nudges, (initial, top, by)) in table.items():
        p = PRESETS[kind]
        assert (p["profile"], p["loop_until_done"], p["max_nudges"]) == (
            profile,
            until_done,
            nudges,
        )
        assert p["iteration_budget"] == {
            "mode": "adaptive",
            "initial": initial,
            "max": top,
            "extend_by": by,
        }
    assert PRESETS["summary"]["tool_choice"] == "none"
    assert PRESETS["summary"]["iteration_budget"] == {"mode": "fixed", "initial": 1, "max": 1}
    assert PRESETS["verify"]["done_judge"] is True


def test_caller_wins_and_adaptive_sugar() -> None:
    opts = agent_preset("repair", {"max_nudges": 5, "iteration_budget": "adaptive"})
    assert opts["max_nudges"] == 5
    assert opts["iteration_budget"] == {"mode": "adaptive", "initial": 4, "max": 16, "extend_by": 2}
    assert agent_budget("repair", {"max": 24})["max"] == 24
    assert agent_budget("adaptive", {"initial": 2, "max": 6})["initial"] == 2
    with pytest.raises(AgentOptionError):
        agent_preset("janitor")


def test_helpers_run_the_loop(rec: Recorder) -> None:
    audit = audit_agent(
        "Audit the release",
        provider=MockProvider([tc("look"), "all good"]),
        tools=[rec.tool("look")],
        require_successful_tools=["look"],
    )
    assert audit.status == "done" and audit.to_dict()["adaptive_budget"]["max"] == 12
    provider = MockProvider(["summary text"])
    summary = summary_agent("Summarize.", provider=provider)
    assert summary.llm.iterations == 1 and provider.requests[0].tool_choice == "none"
    verify = verify_agent(
        "Verify.", provider=MockProvider(["verified"], judge_turns=['{"verdict": "done"}'])
    )
    assert verify.status == "done"


def test_merge_captain_denies_writes_by_default(rec: Recorder) -> None:
    tools = [rec.tool("merge_pr", level="network"), rec.tool("list_prs")]
    result = merge_captain_agent(
        "Sweep open PRs.",
        provider=MockProvider([tc("merge_pr"), tc("list_prs"), "swept"]),
        tools=tools,
    )
    assert rec.names() == ["list_prs"]  # the write never ran; the read did
    denied = [e for e in result.trace["events"] if e.get("status") == "permission_denied"]
    assert denied[0]["decision"]["frame"]["label"] == "merge_captain_consent"
    # the caller's own policy replaces the default consent (caller wins)
    rec.calls.clear()
    merge_captain_agent(
        "Sweep.",
        provider=MockProvider([tc("merge_pr"), "swept"]),
        tools=tools,
        policy={"tools": {"allow": ["merge_pr", "list_prs"]}},
    )
    assert rec.names() == ["merge_pr"]


def test_oncall_captain_rate_limits_tool_calls(rec: Recorder) -> None:
    result = oncall_captain_agent(
        "Triage alerts.",
        provider=MockProvider([tc("page"), tc("page"), tc("page"), "triaged"]),
        tools=[rec.tool("page")],
        rate_limit={"max_calls": 2, "message": "alert-loop cap"},
    )
    assert rec.names() == ["page", "page"]
    capped = [e for e in result.trace["events"] if e.get("status") == "rate_limited"]
    assert capped[0]["error"] == "alert-loop cap"


@pytest.mark.parametrize("key", ["consent", "dry_run", "cheap_caller"])
def test_captain_layers_not_built_yet_fail_loudly(key: str) -> Any:
    with pytest.raises(AgentOptionError) as err:
        merge_captain_agent("x", provider=MockProvider(["ok"]), **{key: True})
    assert err.value.option == key
